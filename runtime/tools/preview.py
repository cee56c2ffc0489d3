"""A change shown before it is made: the call run on a scratch copy of the one file it may change.

For a task that confirms its changes, a person sees the diff a call would make and approves those
exact bytes: the preview names the file's hash as it was previewed, and the call runs only while the
file still has it. Only a tool that changes the one file its `path` names can be previewed (a copy of
that file is all it can touch); what a command or a script would do is known only after it ran.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.artifacts import ArtifactStore
from runtime.tools import diff
from runtime.tools.contract import Tool, ToolContext, ToolFailure
from runtime.tools.executor import execute
from runtime.tools.workspace import relative, resolve


@dataclasses.dataclass(frozen=True)
class Preview:
    """What the call would do to its file: the diff to show, the file's hash now (None: no file), and
    whether it would change anything at all (a call that fails or writes the same bytes does not)."""

    path: str
    sha256: str | None
    diff: str
    changes: bool


def preview(tool: Tool, ctx: ToolContext, arguments: Mapping[str, Any]) -> Preview | None:
    """The call's change to the file its `path` names, made on a copy; None for a call that cannot be
    previewed (a tool that may change any file, or a path the tool refuses anyway)."""
    path = arguments.get("path")
    if tool.contract.may_change != "path" or not isinstance(path, str):
        return None
    try:
        real = resolve(ctx, path)
    except ToolFailure:
        return None
    name = relative(ctx, real)
    before = real.read_bytes() if real.is_file() else None
    scratch = Path(tempfile.mkdtemp(prefix="agentd-preview-"))
    try:
        copy = scratch / "workspace" / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if before is not None:
            copy.write_bytes(before)
        trial = dataclasses.replace(
            ctx, workspace=scratch / "workspace", artifacts=ArtifactStore(scratch / "artifacts"), protected=()
        )
        outcome = execute(tool, trial, dict(arguments), approved=True)
        after = copy.read_bytes() if copy.is_file() else None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    digest = None if before is None else hashlib.sha256(before).hexdigest()
    if not outcome.ok or after == before:
        why = outcome.observation.get("message") or "it would change nothing"
        return Preview(name, digest, f"{name}: nothing would change ({why})", False)
    return Preview(name, digest, diff.file_diff(name, before, after).text, True)


def hashes(ctx: ToolContext, paths: list[str]) -> dict[str, str | None]:
    """Each path's sha256 as the file is now; None where there is no file (or the path leads out)."""
    out: dict[str, str | None] = {}
    for path in paths:
        try:
            real = resolve(ctx, path)
        except ToolFailure:
            out[path] = None
            continue
        out[path] = hashlib.sha256(real.read_bytes()).hexdigest() if real.is_file() else None
    return out

"""Paths a task may touch: those that resolve, symlinks and all, to somewhere inside its workspace."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.tools.contract import ToolContext, ToolRefused


def resolve(ctx: ToolContext, path: str) -> Path:
    """The real path `path` names, or ToolRefused if it leads out of the workspace or into a protected folder.

    Relative paths start at the workspace; an absolute path is allowed only if it lies inside it.
    realpath follows every symlink along the way, so `..`, an absolute path and a symlink (to a
    file or to a directory anywhere in the path) are all judged by where they really end up.
    """
    if "\x00" in path:
        raise ToolRefused("invalid_path", "the path contains a NUL character")
    candidate = Path(path) if os.path.isabs(path) else ctx.workspace / path
    real = Path(os.path.realpath(candidate))
    if not real.is_relative_to(ctx.workspace):
        # The real target is not named: it may be a machine path the model has no business seeing.
        raise ToolRefused(
            "outside_workspace",
            f"{path!r} resolves to a place outside the workspace (through '..', an absolute path or a symlink)",
            {"path": path},
        )
    if is_protected(ctx, real):
        raise ToolRefused(
            "protected_path", f"{path!r} lies in agentd's own data, which tools may not touch", {"path": path}
        )
    return real


def relative(ctx: ToolContext, real: Path) -> str:
    """How the log and the model name a resolved path: relative to the workspace, with forward slashes."""
    return real.relative_to(ctx.workspace).as_posix()


def is_protected(ctx: ToolContext, real: Path) -> bool:
    return any(real.is_relative_to(folder) for folder in ctx.protected)


# Enough for a project's layout at a glance (a few hundred tokens); a larger workspace is listed
# breadth first, so its top levels are always shown, and the rest is found with list_files.
SURVEY_ENTRIES = 200


def survey(ctx: ToolContext, limit: int = SURVEY_ENTRIES) -> tuple[list[str], bool]:
    """The workspace's files and folders breadth first (folders end with "/"), at most `limit` of
    them, and whether that is all of them. agentd's own data is left out, as list_files leaves it
    out; hidden folders (.git, .venv) are named but not opened: their insides are rarely the task.
    The walk stops at the limit, so a huge workspace costs no more than a small one."""
    entries: list[str] = []
    complete = True
    queue = [ctx.workspace]
    while queue:
        folder = queue.pop(0)
        try:
            with os.scandir(folder) as it:
                found = sorted((e for e in it if not is_protected(ctx, Path(e.path))), key=lambda e: e.name)
        except OSError:
            complete = False  # an unreadable folder: what it holds is not known
            continue
        for e in found:
            if len(entries) >= limit:
                return entries, False
            is_dir = e.is_dir(follow_symlinks=False)
            entries.append(relative(ctx, Path(e.path)) + ("/" if is_dir else ""))
            if is_dir and not e.name.startswith("."):
                queue.append(Path(e.path))
    return entries, complete

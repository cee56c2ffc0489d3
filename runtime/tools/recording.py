"""Recording a call's changes: which files a call may change (from its contract), what it changed (two
snapshots compared), and the result the model is shown, with the diff of every change."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from runtime import logs
from runtime.artifacts import REF_PREFIX, ArtifactStore
from runtime.tools import diff, snapshot
from runtime.tools.contract import ToolContext, ToolContract
from runtime.tools.executor import ToolOutcome
from store.events import FileChanged

log = logs.get_logger("agentd.tools")


class _Nothing:
    def __repr__(self) -> str:
        return "NOTHING"


# A call that changes no file: nothing to record.
NOTHING: Final = _Nothing()
# The snapshot after a call may hold what the call wrote: more room than before, so a call that
# writes a large file is still recorded rather than lost.
AFTER_FACTOR = 4


def scope(contract: ToolContract, arguments: Mapping[str, Any]) -> tuple[str, ...] | None | _Nothing:
    """The files a call may change, from its contract: NOTHING, the one file its `path` names, or None
    for the whole workspace (a command, a script or a plugin tool may touch any file)."""
    kind = contract.may_change
    if kind is None:
        return NOTHING
    if kind == "path":
        path = arguments.get("path")
        # A path that is not text cannot be written by the tool, which refuses it as invalid.
        return (path,) if isinstance(path, str) else NOTHING
    return None


def compare(
    ctx: ToolContext, before: snapshot.Snapshot, call_id: str, limit: snapshot.Limit
) -> tuple[list[FileChanged], snapshot.Snapshot | None, str]:
    """What changed since `before`, the snapshot now (to start the next one from), and a note for the
    model when the changes could not be recorded."""
    room = snapshot.Limit(limit.max_files * AFTER_FACTOR, limit.max_bytes * AFTER_FACTOR)
    try:
        after = snapshot.take(ctx, before.paths, previous=before, limit=room)
    except snapshot.TooLarge as e:
        log.error("changes not recorded", task_id=ctx.task_id, call_id=call_id, reason=str(e))
        return [], None, f"what the call changed could not be recorded: {e}"
    return snapshot.changes(before, after, call_id), after, ""


def shown(outcome: ToolOutcome, changed: list[FileChanged], artifacts: ArtifactStore, note: str = "") -> ToolOutcome:
    """The outcome with the diff of what the call changed in its result, so the next decision sees
    which lines went and which came, whatever the tool itself reported."""
    if not changed and not note:
        return outcome
    load = lambda digest: artifacts.get(REF_PREFIX + digest)  # noqa: E731
    text = diff.for_model([diff.of_change(c, load) for c in changed]) if changed else ""
    text = "\n".join(part for part in (text, note) if part)
    return dataclasses.replace(outcome, observation={**outcome.observation, "diff": text})

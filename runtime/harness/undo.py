"""Undo and redo of a task's changes: every file put back as the task found it (or left it), or none.

The order makes it safe to stop at any point. Every file is checked first: one that someone else
changed since the task did refuses the whole restore, and nothing is touched. The restore is then
recorded (RestoreStarted, naming each file's content before and after) before any file is written;
each file written is recorded as it is (FileRestored), and the end (RestoreFinished). A restore that a
crash interrupted is finished by the next undo, redo or diff of the task, from that record: a file
already as the restore wants it is only recorded, one still as the task left it is written, and one
changed by someone else meanwhile is left alone and named.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from runtime import logs
from runtime.artifacts import REF_PREFIX, ArtifactStore
from runtime.atomic import fsync_dir, replace_file
from runtime.errors import AgentdError, InvalidCommand, NotFound
from runtime.tools import changes as changes_
from runtime.tools.changes import Conflict, Kind, NothingToRestore, Plan
from runtime.tools.files import read_regular
from store import EventStore
from store.errors import ConcurrencyConflict
from store.events import FileRestored, Recorded, Restore, RestoreFinished, RestoreStarted, TaskPhase
from store.state import TaskSummary

log = logs.get_logger("agentd.undo")


class ChangedSince(AgentdError):
    """A file the task changed was changed again by someone else: the restore would lose that work."""


@dataclass(frozen=True)
class Outcome:
    """What a restore did (or, with a dry run, would do)."""

    task_id: str
    kind: Kind
    restores: tuple[Restore, ...]
    restore_id: str | None = None
    # Files an interrupted restore of this task left, which were finished first.
    finished_first: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


def load(store: EventStore, task_id: str) -> tuple[list[Recorded], TaskSummary]:
    records = store.read_stream(task_id)
    if not records:
        raise NotFound(f"no task {task_id!r}")
    # Folded with the notifications it was sent, as of its last event: a task that admitted one (an
    # approval decided, a file changed) cannot be folded from its own stream alone.
    state = store.task_at(task_id, records[-1].seq)
    assert state is not None
    return records, state.summary


def restore(
    store: EventStore,
    artifacts: ArtifactStore,
    task_id: str,
    kind: Kind,
    *,
    by: str,
    only: str | None = None,
    dry_run: bool = False,
) -> Outcome:
    """Undo (or redo) what the task changed, all of it or the file `only`; see the module's docstring."""
    finished: tuple[str, ...] = ()
    records, summary = load(store, task_id)
    workspace = Path(summary.workspace)
    if not dry_run:
        finished = finish_interrupted(store, artifacts, task_id, by=by)
        if finished:
            records, summary = load(store, task_id)
    phase = TaskPhase(summary.phase)
    if phase in (TaskPhase.SUBMITTED, TaskPhase.RUNNING):
        raise InvalidCommand(
            f"task {task_id} is {phase.value}; cancel it or let it finish before its changes are undone"
        )
    folded = changes_.fold(records)
    candidates = [h.path for h in folded.changed if only is None or h.path == only]
    try:
        plan = changes_.plan(folded, current_hashes(workspace, candidates), kind, only)
    except NothingToRestore as e:
        if finished:
            # The interrupted restore was all there was to do.
            return Outcome(task_id, kind, (), finished_first=finished)
        raise InvalidCommand(str(e)) from None
    if plan.conflicts:
        raise ChangedSince(_conflict_line(plan.conflicts, kind))
    missing = [
        r.path for r in plan.restores if r.to_sha256 is not None and not artifacts.exists(REF_PREFIX + r.to_sha256)
    ]
    if missing:
        # Checked before anything is recorded: a restore that could not finish would be left half done.
        raise InvalidCommand(
            f"what {missing[0]} must be put back to is not in this data folder's artifact store (a log imported "
            f"from elsewhere carries no file contents); nothing was {'undone' if kind == 'undo' else 'redone'}"
        )
    if dry_run:
        return Outcome(task_id, kind, plan.restores, finished_first=finished)
    restore_id = f"r-{secrets.token_hex(4)}"
    started = RestoreStarted(restore_id=restore_id, kind=kind, by=by, files=plan.restores)
    try:
        store.append(task_id, [started], expected_version=records[-1].stream_version, actor=by)
    except ConcurrencyConflict:
        raise InvalidCommand(f"task {task_id} recorded something meanwhile; run the {kind} again") from None
    skipped = _carry_out(store, artifacts, task_id, workspace, restore_id, kind, plan.restores, by)
    return Outcome(task_id, kind, plan.restores, restore_id, finished, skipped)


def finish_interrupted(store: EventStore, artifacts: ArtifactStore, task_id: str, *, by: str) -> tuple[str, ...]:
    """Finish a restore of the task that a crash interrupted, if there is one; the paths it had left."""
    records, summary = load(store, task_id)
    folded = changes_.fold(records)
    started = folded.unfinished
    if started is None:
        return ()
    left = folded.left()
    log.warning("finishing an interrupted restore", task_id=task_id, restore_id=started.restore_id, files=len(left))
    _carry_out(store, artifacts, task_id, Path(summary.workspace), started.restore_id, started.kind, left, by)
    return tuple(r.path for r in left)


def _carry_out(
    store: EventStore,
    artifacts: ArtifactStore,
    task_id: str,
    workspace: Path,
    restore_id: str,
    kind: Kind,
    restores: Iterable[Restore],
    by: str,
) -> tuple[str, ...]:
    skipped = []
    for r in restores:
        found = current_hashes(workspace, [r.path]).get(r.path)
        if found == r.from_sha256:
            _write(workspace, r, artifacts)
        elif found != r.to_sha256:
            # Changed by someone else between the check and now (or while agentd was down): left alone.
            skipped.append(r.path)
            continue
        store.append(task_id, [FileRestored(
            restore_id=restore_id, kind=kind, path=r.path, from_sha256=r.from_sha256, to_sha256=r.to_sha256,
        )], actor=by)
    store.append(task_id, [RestoreFinished(restore_id=restore_id, skipped=tuple(skipped))], actor=by)
    return tuple(skipped)


def _write(workspace: Path, r: Restore, artifacts: ArtifactStore) -> None:
    target = _inside(workspace, r.path)
    if r.to_sha256 is None:
        target.unlink(missing_ok=True)
        fsync_dir(target.parent)
        return
    data = artifacts.get(REF_PREFIX + r.to_sha256)
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, data, mode=r.mode)
    fsync_dir(target.parent)


def _inside(workspace: Path, path: str) -> Path:
    """The file `path` names in the workspace; refused if it leads out (through a symlink made since)."""
    real = Path(os.path.realpath(workspace / path))
    if not real.is_relative_to(Path(os.path.realpath(workspace))):
        raise InvalidCommand(f"{path} now leads out of the workspace; it is not touched")
    return real


def current_hashes(workspace: Path, paths: Iterable[str]) -> dict[str, str | None]:
    """Each path's sha256 as the file is now, None where there is no file."""
    out: dict[str, str | None] = {}
    for path in paths:
        real = _inside(workspace, path)
        try:
            data = read_regular(real, path, None)
        except AgentdError:
            # Not a regular file any more (a folder, a socket): it is not what the task left either.
            out[path] = None if not real.exists() else "not-a-file"
            continue
        out[path] = hashlib.sha256(data).hexdigest()
    return out


def _conflict_line(conflicts: tuple[Conflict, ...], kind: Kind) -> str:
    first = conflicts[0].describe()
    more = f" (and {len(conflicts) - 1} more file{'' if len(conflicts) == 2 else 's'})" if len(conflicts) > 1 else ""
    return f"{first}{more}; nothing was {'undone' if kind == 'undo' else 'redone'}"


def describe(plan_or_outcome: Outcome | Plan) -> list[str]:
    """One line per file, for people: what was (or would be) done to it."""
    lines = []
    for r in plan_or_outcome.restores:
        if r.from_sha256 is None:
            lines.append(f"recreate {r.path}")
        elif r.to_sha256 is None:
            lines.append(f"delete {r.path}")
        else:
            lines.append(f"put back {r.path}")
    return lines



"""What a task changed, file by file in the order made, as the CLI's `task diff` and the HTTP API show it,
and an undo's or redo's outcome as both report it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime.artifacts import REF_PREFIX, ArtifactStore
from runtime.errors import InvalidCommand, NotFound
from runtime.tools import changes, diff as diff_
from store.events import FileChanged, FileRestored, Recorded


@dataclass(frozen=True)
class Shown:
    seq: int
    by: str
    diff: diff_.FileDiff

    def as_json(self) -> dict[str, Any]:
        d = self.diff
        return {"seq": self.seq, "by": self.by, "path": d.path, "kind": d.kind, "added": d.added,
                "removed": d.removed, "binary": d.binary, "diff": d.text}


def task_diff(
    task_id: str, records: Sequence[Recorded], artifacts: ArtifactStore, only: str | None = None
) -> list[Shown]:
    """Each change and each undo or redo of the task (of the file `only`, if given), in the order made."""
    if not records:
        raise NotFound(f"no task {task_id!r}")
    folded = changes.fold(records)
    if only is not None and only not in folded.files:
        raise InvalidCommand(f"the task did not change {only}")
    load = lambda digest: artifacts.get(REF_PREFIX + digest)  # noqa: E731
    shown = []
    for rec in sorted((r for h in folded.files.values() for r in h.changes), key=lambda r: r.seq):
        e = rec.event
        if only is not None and e.path != only:
            continue
        if isinstance(e, FileChanged):
            before, after = e.before_sha256, e.after_sha256
            by = f"{e.call_id} {folded.tools.get(e.call_id, '?')}"
        else:
            assert isinstance(e, FileRestored)
            before, after = e.from_sha256, e.to_sha256
            by = f"{e.kind} {e.restore_id} by {rec.actor}"
        try:
            d = diff_.file_diff(e.path, *(None if digest is None else load(digest) for digest in (before, after)))
        except NotFound:
            # An imported log carries the events, not the artifact store: the change is known, its text is not.
            kind = "created" if before is None else "deleted" if after is None else "changed"
            d = diff_.FileDiff(e.path, kind, "(its contents are not in this data folder's artifact store)\n", 0, 0)
        shown.append(Shown(rec.seq, by, d))
    return shown


def restore_json(task_id: str, kind: str, dry_run: bool, outcome: Any) -> dict[str, Any]:
    """An undo's or redo's outcome (runtime.harness.undo.restore) as `task undo --json` prints it."""
    return {
        "task_id": task_id, "kind": kind, "dry_run": dry_run, "restore_id": outcome.restore_id,
        "files": [r.model_dump() for r in outcome.restores], "finished_first": list(outcome.finished_first),
        "skipped": list(outcome.skipped),
    }

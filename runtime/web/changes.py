"""The files a task changed, as its page shows them: each file's net diff, its state, and what Undo or Redo does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from runtime.artifacts import REF_PREFIX, ArtifactStore
from runtime.errors import AgentdError
from runtime.tools import changes as changes_, diff as diff_
from store.events import FileRestored, Recorded, Restore, RestoreFinished, RestoreStarted

# Past these the page says how large the change is and leaves the diff to `agentd task diff`: a page
# refetched on every event of a running task must not diff megabytes each time.
DIFF_LINES = 400
DIFF_BYTES = 512 * 1024


@dataclass(frozen=True)
class DiffView:
    """A diff as the page prints it: each line with the class that colours it, cut at DIFF_LINES."""

    kind: str  # "created", "changed", "deleted"
    added: int
    removed: int
    binary: bool
    lines: tuple[tuple[str, str], ...]
    note: str | None  # why less than the whole diff is shown, or why none is


@dataclass(frozen=True)
class ChangedFile:
    path: str
    # "changed": as the task left it; "undone": back as before the task; "same": the task's own changes
    # cancel out, so there is nothing to undo.
    state: str
    changes: int
    diff: DiffView | None  # None when the page has no artifact store to read contents from

    @property
    def undoable(self) -> bool:
        return self.state == "changed"

    @property
    def redoable(self) -> bool:
        return self.state == "undone"


@dataclass(frozen=True)
class Changes:
    files: tuple[ChangedFile, ...]
    # A restore a crash left half-way: the next Undo or Redo finishes it first.
    interrupted: bool

    @property
    def undoable(self) -> bool:
        return any(f.undoable for f in self.files)

    @property
    def redoable(self) -> bool:
        return any(f.redoable for f in self.files)


def of_task(records: Sequence[Recorded], artifacts: ArtifactStore | None) -> Changes:
    """Every file the task changed, in the order first changed, each with the diff from its content before
    the task's first change to after its last: the change Undo takes back, whatever steps made it."""
    folded = changes_.fold(records)
    files = []
    for h in folded.files.values():
        state = "same" if not h.net else "undone" if h.undone else "changed"
        shown = None if artifacts is None else view(artifacts, h.path, h.before, h.after)
        files.append(ChangedFile(h.path, state, sum(1 for r in h.changes if not isinstance(r.event, FileRestored)),
                                 shown))
    return Changes(tuple(files), folded.unfinished is not None)


def of_restores(artifacts: ArtifactStore, restores: Sequence[Restore]) -> list[tuple[Restore, DiffView]]:
    """What a restore does to each file: the diff from the file as it is now to what it will be."""
    return [(r, view(artifacts, r.path, r.from_sha256, r.to_sha256)) for r in restores]


def verb(r: Restore) -> str:
    if r.from_sha256 is None:
        return "recreate"
    if r.to_sha256 is None:
        return "delete"
    return "put back"


def done_line(records: Sequence[Recorded], restore_id: str) -> str | None:
    """What the restore `restore_id` did, from the log, for the page shown after it; None if it is not there."""
    started, written, skipped = None, [], ()
    for rec in records:
        e = rec.event
        if isinstance(e, RestoreStarted) and e.restore_id == restore_id:
            started = e
        elif isinstance(e, FileRestored) and e.restore_id == restore_id:
            written.append(("deleted" if e.to_sha256 is None else "recreated" if e.from_sha256 is None
                            else "put back") + f" {e.path}")
        elif isinstance(e, RestoreFinished) and e.restore_id == restore_id:
            skipped = e.skipped
    if started is None:
        return None
    line = f"{'Undone' if started.kind == 'undo' else 'Redone'} by {started.by}: {', '.join(written) or 'nothing'}"
    if skipped:
        line += f"; left as found, changed meanwhile: {', '.join(skipped)}"
    return line + "."


def view(artifacts: ArtifactStore, path: str, before: str | None, after: str | None) -> DiffView:
    try:
        return _view(artifacts, path, before, after)
    except AgentdError as e:
        # Not cached: a content restored to the artifact store shows at the next look.
        kind = "created" if before is None else "deleted" if after is None else "changed"
        return DiffView(kind, 0, 0, False, (), f"The content is not in the artifact store: {e}.")


# Contents are named by their hashes, so a diff once made holds for good.
@lru_cache(maxsize=256)
def _view(artifacts: ArtifactStore, path: str, before: str | None, after: str | None) -> DiffView:
    old, new = _content(artifacts, before), _content(artifacts, after)
    largest = max(len(old or b""), len(new or b""))
    if largest > DIFF_BYTES:
        kind = "created" if before is None else "deleted" if after is None else "changed"
        note = f"Too large to show here ({largest:,} bytes); agentd task diff shows it."
        return DiffView(kind, 0, 0, False, (), note)
    d = diff_.file_diff(path, old, new)
    lines = d.text.splitlines(keepends=True)
    note = None
    if len(lines) > DIFF_LINES:
        note = f"cut: the first {DIFF_LINES:,} of {len(lines):,} lines shown; agentd task diff shows them all"
        lines = lines[:DIFF_LINES]
    return DiffView(d.kind, d.added, d.removed, d.binary, tuple((_class(line), line) for line in lines), note)


def _content(artifacts: ArtifactStore, digest: str | None) -> bytes | None:
    return None if digest is None else artifacts.get(REF_PREFIX + digest)


def _class(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    if line.startswith("\\"):
        return "note"
    return "ctx"

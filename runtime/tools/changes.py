"""A task's changes to its workspace, folded from its events, and the plan to undo or redo them.

Pure: the events and the files' hashes as they are now go in, a plan comes out. Carrying a plan out
(writing files, recording it) is the harness's (runtime.harness.undo); showing it, the page's and the
command line's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from store.events import (
    FileChanged,
    FileRestored,
    Recorded,
    Restore,
    RestoreFinished,
    RestoreStarted,
    ToolCallProposed,
)

Kind = Literal["undo", "redo"]


@dataclass
class FileHistory:
    """One file the task changed: its content before the task's first change and after its last one,
    whether that is undone now, and every change and restore in log order."""

    path: str
    before: str | None
    after: str | None
    mode: int
    undone: bool = False
    changes: list[Recorded] = field(default_factory=list)

    @property
    def net(self) -> bool:
        """Whether the task left the file other than it found it (a change and its reverse cancel out)."""
        return self.before != self.after

    @property
    def now(self) -> str | None:
        """The content the file has if nobody else touched it since."""
        return self.before if self.undone else self.after


@dataclass
class Changes:
    """Every file a task changed, in the order first changed, and a restore a crash left unfinished."""

    files: dict[str, FileHistory] = field(default_factory=dict)
    # call id -> tool, to say which call made a change.
    tools: dict[str, str] = field(default_factory=dict)
    unfinished: RestoreStarted | None = None
    restored: set[str] = field(default_factory=set)

    def apply(self, rec: Recorded) -> None:
        e = rec.event
        if isinstance(e, ToolCallProposed):
            self.tools[e.call_id] = e.tool
        elif isinstance(e, FileChanged):
            history = self.files.get(e.path)
            if history is None:
                history = self.files[e.path] = FileHistory(e.path, e.before_sha256, e.after_sha256, e.mode)
            history.after, history.undone = e.after_sha256, False
            history.changes.append(rec)
        elif isinstance(e, RestoreStarted):
            self.unfinished, self.restored = e, set()
        elif isinstance(e, FileRestored):
            history = self.files.get(e.path)
            if history is not None:
                history.undone = e.kind == "undo"
                history.changes.append(rec)
            self.restored.add(e.path)
        elif isinstance(e, RestoreFinished):
            self.unfinished = None

    @property
    def changed(self) -> list[FileHistory]:
        """The files the task left other than it found them."""
        return [h for h in self.files.values() if h.net]

    def left(self) -> list[Restore]:
        """What the unfinished restore has still to do: its files not yet recorded as restored."""
        if self.unfinished is None:
            return []
        return [r for r in self.unfinished.files if r.path not in self.restored]


def fold(records: Iterable[Recorded]) -> Changes:
    changes = Changes()
    for rec in records:
        changes.apply(rec)
    return changes


class NothingToRestore(Exception):
    """There is nothing to undo (or redo) for what was asked; the message says why."""


@dataclass(frozen=True)
class Conflict:
    """A file found other than the task left it: someone changed it since, so it is not touched."""

    path: str
    expected: str | None
    found: str | None

    def describe(self) -> str:
        if self.found is None:
            return f"{self.path} was deleted after the task changed it"
        if self.expected is None:
            return f"{self.path} was created again after the task deleted it"
        return f"{self.path} was changed after the task changed it"


@dataclass(frozen=True)
class Plan:
    kind: Kind
    restores: tuple[Restore, ...]
    conflicts: tuple[Conflict, ...]


def plan(changes: Changes, current: Mapping[str, str | None], kind: Kind, only: str | None = None) -> Plan:
    """What an undo (or redo) of the task's changes would write: each file the task changed, from the
    content the task left (`current` must show it so) back to what it found (or forward again).

    Raises NothingToRestore when no file is left to undo (or redo), or `only` names a file the task
    did not change. Files found changed by someone else are conflicts: the caller touches nothing then.
    """
    histories = [h for h in changes.changed if only is None or h.path == only]
    if only is not None and not histories:
        raise NothingToRestore(f"the task did not change {only}")
    todo = [h for h in histories if h.undone == (kind == "redo")]
    if not todo:
        state = "undone" if kind == "undo" else "in place"
        subject = only or f"{len(histories)} file{'' if len(histories) == 1 else 's'} it changed"
        raise NothingToRestore(
            f"nothing to {kind}: the task changed no file" if not histories
            else f"nothing to {kind}: {subject} already {state}"
        )
    restores, conflicts = [], []
    for h in todo:
        expected, target = (h.after, h.before) if kind == "undo" else (h.before, h.after)
        found = current.get(h.path)
        if found != expected:
            conflicts.append(Conflict(h.path, expected, found))
        else:
            restores.append(Restore(path=h.path, from_sha256=expected, to_sha256=target, mode=h.mode))
    return Plan(kind, tuple(restores), tuple(conflicts))

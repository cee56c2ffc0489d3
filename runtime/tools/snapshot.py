"""Workspace snapshots: each file's size, mtime, mode and hash, with its bytes kept in the artifact store.

Taken before and after a tool call that may change files, so that whatever the call created, changed or
deleted is recorded with both versions (`changes`) and can be shown and put back. A file tool that
changes only the file its `path` names is snapshotted at that path; any other tool that may write or act
outside (a shell command, a skill's script, a plugin tool) at the whole workspace.

A file is read only when its size, mtime or inode differs from the previous snapshot of the same
workspace, or when its mtime is too close to that snapshot's time to trust (git's "racily clean"
files): a command that changes nothing costs a walk of stat calls, and content already stored costs
nothing again. agentd's own data and version-control internals (restoring a repository's objects
piecemeal would damage it) are left out; symlinks are not followed and not recorded.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from runtime.artifacts import REF_PREFIX, ArtifactStore
from runtime.errors import AgentdError
from runtime.tools.contract import ToolContext, ToolFailure
from runtime.tools.workspace import is_protected, resolve
from store.events import FileChanged

# Folders whose files are a tool's own bookkeeping, not the user's: a `git commit` rewrites hundreds.
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn"})
# A file whose mtime is this close to the snapshot it was last read in may have changed within the
# same clock tick without its mtime moving; it is read again.
RACY_NS = 2_000_000_000


@dataclasses.dataclass(frozen=True)
class Limit:
    """How much of a workspace agentd records before a call; more waits for a person, never runs unrecorded."""

    max_files: int = 20_000
    max_bytes: int = 512 * 1024 * 1024


class FileState(NamedTuple):
    size: int
    mtime_ns: int
    ino: int
    mode: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The files of a workspace (or of `paths` in it) at `taken_ns`, by path from the workspace root."""

    taken_ns: int
    files: Mapping[str, FileState]
    paths: tuple[str, ...] | None = None

    def encode(self) -> bytes:
        """As JSON, for the artifact store: the record a crash leaves to compare the workspace with."""
        files = {p: list(f) for p, f in sorted(self.files.items())}
        raw = {"taken_ns": self.taken_ns, "paths": self.paths, "files": files}
        return json.dumps(raw, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Snapshot:
        raw = json.loads(data)
        paths = raw.get("paths")
        return cls(raw["taken_ns"], {p: FileState(*f) for p, f in raw["files"].items()},
                   None if paths is None else tuple(paths))


class TooLarge(AgentdError):
    """The workspace holds more than a snapshot may record."""

    def __init__(self, files: int, size: int, limit: Limit) -> None:
        self.files, self.size, self.limit = files, size, limit
        super().__init__(
            f"the workspace is too large to record ({files} files, {_mb(size)} and counting; the bound is "
            f"{limit.max_files} files or {_mb(limit.max_bytes)}): what the call changes could not be shown or undone"
        )


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def take(
    ctx: ToolContext,
    paths: Sequence[str] | None = None,
    *,
    previous: Snapshot | None = None,
    limit: Limit = Limit(),
) -> Snapshot:
    """The workspace's files now (only `paths`, when given), each one's bytes put in the artifact store.

    Raises TooLarge past `limit`. A path that leads out of the workspace or into agentd's data is not
    recorded: the tool refuses it before it can write there.
    """
    started = time.time_ns()
    known = previous.files if previous is not None else {}
    trusted_before = (previous.taken_ns - RACY_NS) if previous is not None else 0
    files: dict[str, FileState] = {}
    total = 0
    read = False
    for name, real in _candidates(ctx, paths):
        try:
            st = os.stat(real, follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        total += st.st_size
        if len(files) + 1 > limit.max_files or total > limit.max_bytes:
            raise TooLarge(len(files) + 1, total, limit)
        old = known.get(name)
        if (
            old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns and old.ino == st.st_ino
            and st.st_mtime_ns < trusted_before
        ):
            files[name] = old._replace(mode=stat.S_IMODE(st.st_mode))
            continue
        digest = _keep(ctx.artifacts, real)
        read = True
        if digest is None:
            continue
        files[name] = FileState(st.st_size, st.st_mtime_ns, st.st_ino, stat.S_IMODE(st.st_mode), digest)
    if read:
        # Durable before the call runs: the log is about to name these contents as what undo puts back.
        ctx.artifacts.flush()
    return Snapshot(started, files, None if paths is None else tuple(paths))


def check_size(ctx: ToolContext, paths: Sequence[str] | None = None, limit: Limit = Limit()) -> None:
    """Raise TooLarge if a snapshot of the workspace (or of `paths`) would pass `limit`, reading no file."""
    files = total = 0
    for _, real in _candidates(ctx, paths):
        try:
            st = os.stat(real, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            files, total = files + 1, total + st.st_size
            if files > limit.max_files or total > limit.max_bytes:
                raise TooLarge(files, total, limit)


def _candidates(ctx: ToolContext, paths: Sequence[str] | None) -> Iterable[tuple[str, Path]]:
    if paths is not None:
        for path in paths:
            try:
                real = resolve(ctx, path)
            except ToolFailure:
                continue
            yield real.relative_to(ctx.workspace).as_posix(), real
        return
    pending = [ctx.workspace]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            real = Path(entry.path)
            if entry.is_symlink() or is_protected(ctx, real):
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_FOLDERS:
                    pending.append(real)
            elif entry.is_file(follow_symlinks=False):
                yield real.relative_to(ctx.workspace).as_posix(), real


def _keep(artifacts: ArtifactStore, real: Path) -> str | None:
    """Put the file's bytes in the store and return their hash; None if it cannot be read (then it is
    not recorded, as a file agentd cannot read is not one it can put back)."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return artifacts.put(data, sync=False).removeprefix(REF_PREFIX)


def changes(before: Snapshot, after: Snapshot, call_id: str) -> list[FileChanged]:
    """Every file created, changed or deleted between two snapshots of the same paths, in path order."""
    found = []
    for path in sorted(set(before.files) | set(after.files)):
        old, new = before.files.get(path), after.files.get(path)
        if old is not None and new is not None and old.sha256 == new.sha256:
            continue
        found.append(FileChanged(
            call_id=call_id, path=path,
            before_sha256=old.sha256 if old else None, after_sha256=new.sha256 if new else None,
            before_size=old.size if old else None, after_size=new.size if new else None,
            mode=(old or new).mode,
        ))
    return found

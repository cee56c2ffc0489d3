"""The high-water mark: the last seq committed to a SQLite log and its hash, in a file beside the database.

A -wal cut short (a copy taken after kill -9, a damaged disk) reads as an earlier, consistent state of
the database: a shorter log whose chain holds and whose projections agree with it. Only something
outside the database and its WAL can tell it from a healthy log, and this file is that: the writer
raises it after each commit, and `agentd db check` and `agentd replay` hold the log to it.

It is not synced: after a crash of agentd it is in the page cache, and an fsync would double the cost
of a durable commit. Written after the commit, it is never ahead of a log whose commits are synced
(`sqlite_synchronous = full`); with `normal`, a power loss may lose commits it names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote

from sqlalchemy.engine import make_url

from store.errors import StoreError

SUFFIX = "-mark"
# Fixed width, so that a new mark overwrites the old one in place and is never read half old.
_WIDTH = 20 + 1 + 64 + 1
_READS = 5


class Position(NamedTuple):
    """What a mark holds: the last seq committed, its hash, and the file that says so."""

    seq: int
    hash: str
    path: Path


def committed(url: str) -> Position | None:
    """The position the mark beside the database at `url` holds, if there is one.

    Read it before the snapshot that it is held against: the writer raises it only after a commit, so a
    snapshot taken after it holds at least what it names; one taken before it might not.
    """
    mark = Mark.beside(url)
    return None if mark is None else mark.read()


class Mark:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._failed = False

    @classmethod
    def beside(cls, url: str) -> Mark | None:
        """The mark of the SQLite database file at `url`; None for any other database."""
        u = make_url(url)
        database = u.database or ""
        if u.get_backend_name() != "sqlite" or database in ("", ":memory:") or u.query.get("mode") == "memory":
            return None
        if u.query.get("uri") == "true":
            if not database.startswith("file:"):
                return None
            database = unquote(database.removeprefix("file:"))
        return cls(Path(database + SUFFIX))

    def read(self) -> Position | None:
        """The position the mark holds; None where there is none. A file that is not a mark is an error.

        Read until two reads agree: another process may be raising the mark as it is read, and a read
        that crosses its write could mix two marks. Each refusal to write rests on this read.
        """
        seen = None
        for _ in range(_READS):
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return None
            except OSError as e:
                raise StoreError(f"the high-water mark {self.path} cannot be read ({e})") from None
            if raw == seen:
                break
            seen = raw
        if not seen:
            # Created, and the process killed before its first write: it marks nothing.
            return None
        return _parse(seen.decode("ascii", "replace"), self.path)

    def advance(self, seq: int, hash: str | None, *, restart: bool = False) -> None:
        """Record that the log holds `seq`, with `hash`, committed; a mark already further is kept, unless
        `restart` (the log was empty before this commit: a new database starts a new mark).

        Never raises: a commit has already happened and must not be reported as failed for its mark.
        """
        if self._failed or hash is None or seq <= 0:
            return
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not restart:
                current = os.pread(self._fd, _WIDTH, 0)
                if current and _seq_of(current) >= seq:
                    return
            os.pwrite(self._fd, f"{seq:020d} {hash:64}\n".encode("ascii"), 0)
        except OSError:
            # A data directory the process cannot write to: db check then finds the mark missing or
            # behind, which is what it is; nothing here is worth failing an append for.
            self._failed = True

    def reset(self, seq: int, hash: str) -> None:
        """Set the mark to the log as it is, lower than it stood: only `agentd db accept-loss` does this,
        after recording the loss (store/loss.py). An empty log has no mark. Raises if it cannot."""
        self.close()
        self._failed = False
        try:
            if seq <= 0:
                self.path.unlink(missing_ok=True)
                return
            # Renamed into place: a reader never finds the mark empty or half written.
            tmp = self.path.with_name(self.path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, f"{seq:020d} {hash:64}\n".encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as e:
            raise StoreError(f"the high-water mark {self.path} cannot be written ({e})") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _parse(text: str, path: Path) -> Position:
    seq, _, hash = text.rstrip("\n").partition(" ")
    if len(text) != _WIDTH or not seq.isdigit() or len(hash) != 64:
        raise StoreError(
            f"the high-water mark {path} is not one agentd wrote ({text[:40]!r}); run `agentd db accept-loss` to "
            "set it to the log as it is"
        )
    return Position(int(seq), hash, path)


def _seq_of(raw: bytes) -> int:
    """The seq a mark holds, 0 for anything else (which the next commit then overwrites)."""
    head = raw[:20]
    return int(head) if head.isdigit() else 0

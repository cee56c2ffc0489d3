"""A full-text index of text lines in SQLite FTS5, ranked by BM25: the workspace's content index, and the
ranking the knowledge base is to share.

Each line of each indexed file is one FTS5 row (`path`, `line`, `text`), so a hit is a line with its
`path:line`, and BM25 weighs a rare word ("Bluefin") above a common one ("the"). The index is derived
data, rebuilt from the files at any time, so it lives in its own database file beside the event store,
never in it, and is configured for that (below).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Bumped whenever SCHEMA changes: the index is derived, so an index of another version is dropped and
# built again from the files rather than migrated.
VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL);
-- unicode61 folds case and accents; remove_diacritics 2 folds them the same way for every script.
-- porter stems English words, so "release notes" finds "Released" and "depends" finds "dependencies".
-- path and line are stored, not searched: a word in a file's name is no evidence of its content.
CREATE VIRTUAL TABLE IF NOT EXISTS lines USING fts5(
    path UNINDEXED, line UNINDEXED, text, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str
    score: float  # BM25, higher is better (SQLite's bm25() is negated so that smaller sorts first)


class FullTextIndex:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # Autocommit; each write below is one explicit transaction.
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # A cache of files on disk: losing the last writes to a crash costs a re-read, never a fact, so
        # no fsync per commit. WAL lets a search read while a refresh writes.
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=OFF")
        self._conn.execute("PRAGMA busy_timeout=5000")
        if self._conn.execute("PRAGMA user_version").fetchone()[0] != VERSION:
            self._conn.executescript(f"DROP TABLE IF EXISTS lines; DROP TABLE IF EXISTS files; {SCHEMA}"
                                     f"PRAGMA user_version = {VERSION};")

    def close(self) -> None:
        self._conn.close()

    def known(self) -> dict[str, tuple[int, int]]:
        """Every indexed file: path -> (mtime_ns, size) as it was when indexed."""
        return {p: (m, s) for p, m, s in self._conn.execute("SELECT path, mtime_ns, size FROM files")}

    def replace(self, path: str, mtime_ns: int, size: int, lines: Sequence[str]) -> None:
        """The file's lines, instead of whatever was indexed for it."""
        with self._transaction():
            self._conn.execute("DELETE FROM lines WHERE path = ?", (path,))
            self._conn.executemany("INSERT INTO lines (path, line, text) VALUES (?, ?, ?)",
                                   [(path, n, text) for n, text in enumerate(lines, start=1) if text.strip()])
            self._conn.execute("INSERT OR REPLACE INTO files (path, mtime_ns, size) VALUES (?, ?, ?)",
                               (path, mtime_ns, size))

    def remove(self, paths: Iterable[str]) -> None:
        with self._transaction():
            for path in paths:
                self._conn.execute("DELETE FROM lines WHERE path = ?", (path,))
                self._conn.execute("DELETE FROM files WHERE path = ?", (path,))

    def search(self, words: Sequence[str], limit: int) -> list[Hit]:
        """The best `limit` lines holding any of `words` (whole words, any case), best first."""
        terms = [w for w in words if w]
        if not terms:
            return []
        # Each word quoted: FTS5 then reads it as a term, never as an operator or a column filter.
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in terms)
        rows = self._conn.execute(
            "SELECT path, line, text, bm25(lines) FROM lines WHERE lines MATCH ? ORDER BY bm25(lines), path, line "
            "LIMIT ?", (match, limit),
        )
        return [Hit(path, int(line), text, -score) for path, line, text, score in rows]

    def lines(self, path: str, first: int, last: int) -> dict[int, str]:
        """The indexed lines of `path` numbered first..last (blank lines are not indexed)."""
        rows = self._conn.execute(
            "SELECT line, text FROM lines WHERE path = ? AND line BETWEEN ? AND ?", (path, first, last)
        )
        return {int(n): text for n, text in rows}

    def _transaction(self):
        return Transaction(self._conn)


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT on an autocommit connection, rolled back on an exception: the write lock
    taken at the start, so a writer never fails half-way on another's lock."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, tb) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")

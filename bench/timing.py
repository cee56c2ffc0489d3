"""A measured rate, and the SQLite file helpers every system's measurement shares."""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Rate:
    """`count` operations (or events) done in `seconds` of wall-clock time."""

    count: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("inf")

    def as_dict(self) -> dict:
        return {"count": self.count, "seconds": round(self.seconds, 4), "per_second": round(self.per_second, 1)}


class Stopwatch:
    """`with Stopwatch() as sw: ...` then `sw.seconds`."""

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started


def checkpoint_and_size(path: str) -> int:
    """Fold the WAL into the database file, then return the bytes of the .db plus its -wal.

    Run it while the owner of the database is idle: a TRUNCATE checkpoint needs no open readers.
    """
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def table_bytes(path: str) -> dict[str, int]:
    """Bytes of pages per table, each table's indexes counted with it (SQLite's dbstat)."""
    conn = sqlite3.connect(path)
    try:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')"))
        sizes: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            sizes[table] = sizes.get(table, 0) + size
        return sizes
    except sqlite3.OperationalError:
        return {}  # a SQLite built without dbstat: no breakdown, the total still stands
    finally:
        conn.close()


def pragmas(conn: sqlite3.Connection) -> dict[str, str]:
    """The durability settings a connection actually runs with."""
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    return {"synchronous": SYNCHRONOUS_NAMES.get(sync, str(sync)), "journal_mode": str(mode).lower()}


SYNCHRONOUS_NAMES = {0: "off", 1: "normal", 2: "full", 3: "extra"}


class RawCommits:
    """Plain sqlite3, WAL, synchronous=FULL, one-row INSERT + COMMIT: this disk's fsync ceiling."""

    def __init__(self, folder: str) -> None:
        self.conn = sqlite3.connect(os.path.join(folder, "raw.db"), isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
        self.settings = pragmas(self.conn)

    def __enter__(self) -> RawCommits:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def single(self, ops: int) -> Rate:
        body = "x" * 400
        with Stopwatch() as sw:
            for _ in range(ops):
                self.conn.execute("BEGIN IMMEDIATE")
                self.conn.execute("INSERT INTO t (body) VALUES (?)", (body,))
                self.conn.execute("COMMIT")
        return Rate(ops, sw.seconds)

    def event_rows(self, ddl: list[str], rows: list[tuple], batch: int = 1000) -> Rate:
        """`rows` of agentd's log into a copy of its events table (same indexes), `batch` rows per commit.

        Rows already serialised, one executemany per commit, no projections: what SQLite alone makes of
        the inserts agentd's batched append does, on this disk, and so a ceiling for it.
        """
        for statement in ddl:
            self.conn.execute(statement)
        insert = f"INSERT INTO events VALUES ({', '.join('?' * len(rows[0]))})"
        with Stopwatch() as sw:
            for i in range(0, len(rows), batch):
                self.conn.execute("BEGIN IMMEDIATE")
                self.conn.executemany(insert, rows[i : i + batch])
                self.conn.execute("COMMIT")
        return Rate(len(rows), sw.seconds)

"""Artifact bytes in the database: what workers on several hosts share when they share nothing else.

An artifact is named by the sha256 of what it holds and never changes, so a row is written once (a
second put of the same name does nothing, whoever makes it) and may be read by any worker. Each worker
keeps its own files in front of the table as a cache (runtime/artifacts.py). A SQLite file lives on one
host with its artifacts beside it, so the table is used only where the database is a server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection, create_engine, select
from sqlalchemy.dialects import postgresql, sqlite

from store.database import reading_or_writing
from store.tables import blobs

T = TypeVar("T")

_INSERT = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


class BlobTable:
    """The `blobs` table of one database, each call in a short transaction on a connection of its own:
    an artifact written or read never waits behind the log's append lock."""

    def __init__(self, url: str) -> None:
        self._engine = create_engine(url, pool_size=1, max_overflow=2)
        self._insert = _INSERT[self._engine.dialect.name]

    def close(self) -> None:
        self._engine.dispose()

    def put(self, digest: str, data: bytes) -> None:
        """Keep `data` under `digest`, unless a row of that name is there already (it holds the same)."""
        statement = self._insert(blobs).values(digest=digest, data=data).on_conflict_do_nothing(
            index_elements=["digest"]
        )
        self._run(lambda conn: conn.execute(statement))

    def get(self, digest: str) -> bytes | None:
        """The bytes kept under `digest`, or None."""
        row = self._run(lambda conn: conn.execute(select(blobs.c.data).where(blobs.c.digest == digest)).first())
        return None if row is None else bytes(row[0])

    def has(self, digest: str) -> bool:
        found = self._run(lambda conn: conn.execute(select(blobs.c.digest).where(blobs.c.digest == digest)).first())
        return found is not None

    def _run(self, fn: Callable[[Connection], T]) -> T:
        with reading_or_writing("the database's artifact table"), self._engine.begin() as conn:
            return fn(conn)

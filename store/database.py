"""Engines for the store: one for the single writer, one for readers, each configured on purpose."""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from typing import Iterator

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool, QueuePool

from store.errors import DatabaseCorrupt, DatabaseLocked, StoreError

SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}


@dataclass(frozen=True)
class Engines:
    write: Engine
    read: Engine
    url: str

    @property
    def is_sqlite(self) -> bool:
        return self.write.dialect.name == "sqlite"

    def dispose(self) -> None:
        self.write.dispose()
        self.read.dispose()


def create_engines(url: str, *, synchronous: str = "full", busy_timeout_ms: int = 5000) -> Engines:
    if make_url(url).get_backend_name() != "sqlite":
        write = create_engine(url, poolclass=QueuePool, pool_size=1, max_overflow=0)
        read = create_engine(url, pool_size=4, max_overflow=8)
        return Engines(write, read, url)
    # The writer keeps one connection for its whole life; SQLite allows one writer anyway. A second
    # checkout is a bug, so it fails at once instead of waiting for a connection that never returns.
    write = create_engine(url, poolclass=QueuePool, pool_size=1, max_overflow=0, pool_timeout=1)
    read = create_engine(url, poolclass=NullPool)
    _configure_sqlite(write, synchronous, busy_timeout_ms, begin="BEGIN IMMEDIATE")
    _configure_sqlite(read, synchronous, busy_timeout_ms, begin="BEGIN")
    return Engines(write, read, url)


def _configure_sqlite(engine: Engine, synchronous: str, busy_timeout_ms: int, begin: str) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        # Python 3.11's sqlite3 opens transactions implicitly and too late; turn that off and emit BEGIN
        # ourselves (below), so every transaction starts where SQLAlchemy thinks it does.
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        # WAL: readers see a consistent snapshot and never wait for the writer, nor it for them.
        cur.execute("PRAGMA journal_mode=WAL")
        # FULL syncs the WAL on every commit: a committed event survives power loss, not just a crash.
        cur.execute(f"PRAGMA synchronous={SYNCHRONOUS[synchronous]}")
        # Wait this long for another process's lock before failing with "database is locked".
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        # Projections reference tasks; SQLite checks foreign keys only when asked, per connection.
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn) -> None:
        # IMMEDIATE takes the write lock at BEGIN, so a writer waits (busy_timeout) for the lock instead
        # of failing with SQLITE_BUSY when its read turns into a write halfway through.
        conn.exec_driver_sql(begin)


def translate(e: BaseException, url: str) -> StoreError:
    """Turn a driver error into the one-line store error a user can act on."""
    orig = getattr(e, "orig", e)
    msg = str(orig).strip() or type(orig).__name__
    where = describe(url)
    if isinstance(orig, sqlite3.OperationalError) and "locked" in msg:
        return DatabaseLocked(f"{where} is locked by another process (gave up after the busy timeout)")
    if isinstance(orig, sqlite3.DatabaseError) and any(
        s in msg for s in ("malformed", "not a database", "file is encrypted", "disk image")
    ):
        return DatabaseCorrupt(f"{where} is corrupt or not a database ({msg}); committed data is left as it is")
    if isinstance(orig, sqlite3.OperationalError) and "unable to open" in msg:
        return StoreError(f"{where} cannot be opened ({msg})")
    return StoreError(f"{where}: {msg}")


@contextlib.contextmanager
def translating(url: str) -> Iterator[None]:
    """Re-raise driver errors as store errors, keeping the original as the cause for the log."""
    try:
        yield
    except DBAPIError as e:
        raise translate(e, url) from e
    except sqlite3.DatabaseError as e:
        raise translate(e, url) from e


@contextlib.contextmanager
def reading_or_writing(what: str) -> Iterator[None]:
    """A database error inside (a server out of reach, a lost connection) as the one-line store error
    that says `what` could not be read or written: the caller's to handle as any store failure."""
    try:
        yield
    except SQLAlchemyError as e:
        raise StoreError(f"{what} could not be read or written: {e.__class__.__name__}: {e}") from e


def describe(url: str) -> str:
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        return f"database {u.database}"
    return f"database {u.render_as_string(hide_password=True)}"

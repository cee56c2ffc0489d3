"""Workers and their leases: which agentd process runs which task when several serve one database.

The table is the truth, not a message. A worker claims a runnable task by taking its lease, renews every
lease it holds with each heartbeat, and gives them back when it stops. A worker that dies (kill -9, a
lost host) only stops renewing: once its leases expire, any other worker may take them, and resumes
the task from its last event as a restart would.

A claim locks the task's lease row `FOR UPDATE SKIP LOCKED` on PostgreSQL: two workers reaching for
one task do not queue behind each other; the second sees no row and moves on to the next task. SQLite
has one writer at a time, which orders claims by itself (the clause renders as nothing there).

Times are seconds since the epoch from the database's clock on PostgreSQL, so workers on hosts whose
clocks disagree still agree on when a lease runs out; a SQLite file lives on one host and uses its clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, Engine, create_engine, delete, insert, select, update

from store.database import reading_or_writing
from store.errors import StoreError
from store.tables import leases, workers

T = TypeVar("T")


class Worker(NamedTuple):
    worker_id: str
    host: str
    pid: int
    address: str
    workspaces: tuple[str, ...]
    started_at: float
    heartbeat_at: float
    stopped_at: float | None


class Lease(NamedTuple):
    task_id: str
    worker_id: str
    acquired_at: float
    expires_at: float


def clock(conn: Connection) -> float:
    """Now, in seconds since the epoch, by the clock every worker of this database shares."""
    if conn.dialect.name == "postgresql":
        return float(conn.exec_driver_sql("SELECT extract(epoch FROM clock_timestamp())").scalar_one())
    return time.time()


class WorkerTable:
    """The `workers` and `leases` tables of one database, each call in a transaction of its own.

    On SQLite the calls go through the store's writer (`write`), the file's one writer; on a server they
    take a connection of their own, so a heartbeat never waits behind the log's append lock.
    """

    def __init__(self, url: str, write: Callable[[Callable[[Connection], Any]], Any], is_sqlite: bool) -> None:
        self._write = write
        self._engine: Engine | None = None if is_sqlite else create_engine(url, pool_size=1, max_overflow=1)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

    def _run(self, fn: Callable[[Connection], T]) -> T:
        with reading_or_writing("the workers table"):
            if self._engine is None:
                return self._write(fn)
            with self._engine.begin() as conn:
                return fn(conn)

    # -- a worker's own life --------------------------------------------------------------------

    def register(self, worker_id: str, host: str, pid: int, address: str = "", workspaces: Sequence[str] = ()) -> None:
        """Say this worker serves the database, from now."""
        def fn(conn: Connection) -> None:
            now = clock(conn)
            conn.execute(delete(workers).where(workers.c.worker_id == worker_id))
            conn.execute(insert(workers).values(
                worker_id=worker_id, host=host, pid=pid, address=address, workspaces="\n".join(workspaces),
                started_at=now, heartbeat_at=now, stopped_at=None,
            ))
        self._run(fn)

    def heartbeat(self, worker_id: str, ttl_s: float) -> set[str]:
        """Say this worker is alive and renew its leases for `ttl_s`; the tasks it still holds.

        A task missing from the answer was taken by another worker after this one's lease ran out (the
        process stalled longer than a lease): its runner here must stop.
        """
        def fn(conn: Connection) -> set[str]:
            now = clock(conn)
            found = conn.execute(
                update(workers).where(workers.c.worker_id == worker_id, workers.c.stopped_at.is_(None))
                .values(heartbeat_at=now)
            ).rowcount
            if not found:
                raise StoreError(f"worker {worker_id} is not registered as serving; it cannot hold leases")
            conn.execute(update(leases).where(leases.c.worker_id == worker_id).values(expires_at=now + ttl_s))
            return set(conn.execute(select(leases.c.task_id).where(leases.c.worker_id == worker_id)).scalars())
        return self._run(fn)

    def stop(self, worker_id: str) -> None:
        """This worker stops: its tasks go back at once rather than when their leases would expire."""
        def fn(conn: Connection) -> None:
            conn.execute(update(workers).where(workers.c.worker_id == worker_id).values(stopped_at=clock(conn)))
            _free(conn, leases.c.worker_id == worker_id)
        self._run(fn)

    # -- leases ---------------------------------------------------------------------------------

    def claim(self, task_id: str, worker_id: str, ttl_s: float) -> bool:
        """Take the task's lease for `ttl_s` if nobody holds it (or its holder's lease ran out)."""
        def fn(conn: Connection) -> bool:
            now = clock(conn)
            # The row to lock. Of two first claimants, the second's insert waits for the first's commit
            # and then does nothing; its lock below finds the first's lease.
            conn.execute(
                _insert(conn).values(task_id=task_id, worker_id=None, expires_at=0.0)
                .on_conflict_do_nothing(index_elements=["task_id"])
            )
            row = conn.execute(
                select(leases.c.worker_id, leases.c.expires_at).where(leases.c.task_id == task_id)
                .with_for_update(skip_locked=True)
            ).first()
            if row is None:
                return False  # another worker is claiming it at this moment
            holder, expires_at = row
            if holder not in (None, worker_id) and expires_at > now:
                return False
            acquired = {} if holder == worker_id else {"acquired_at": now}
            conn.execute(
                update(leases).where(leases.c.task_id == task_id)
                .values(worker_id=worker_id, expires_at=now + ttl_s, **acquired)
            )
            return True
        return self._run(fn)

    def release(self, worker_id: str, task_ids: Iterable[str]) -> None:
        """Give tasks back: they stopped here (finished, or waiting for a person) and any worker may
        take them up when something new happens."""
        ids = list(task_ids)
        if ids:
            self._run(lambda conn: _free(conn, (leases.c.worker_id == worker_id) & leases.c.task_id.in_(ids)))

    # -- reading --------------------------------------------------------------------------------

    def held_elsewhere(self, worker_id: str) -> set[str]:
        """The tasks another worker holds a live lease on: not this worker's to run."""
        def fn(conn: Connection) -> set[str]:
            now = clock(conn)
            rows = conn.execute(
                select(leases.c.task_id)
                .where(leases.c.worker_id.is_not(None), leases.c.worker_id != worker_id, leases.c.expires_at > now)
            )
            return set(rows.scalars())
        return self._run(fn)

    def snapshot(self) -> tuple[float, list[Worker], list[Lease]]:
        return self._run(snapshot)


def snapshot(conn: Connection) -> tuple[float, list[Worker], list[Lease]]:
    """The database's time now, every worker that registered, and every lease held (any connection)."""
    now = clock(conn)
    found = [
        Worker(r.worker_id, r.host, r.pid, r.address, tuple(r.workspaces.split("\n")) if r.workspaces else (),
               r.started_at, r.heartbeat_at, r.stopped_at)
        for r in conn.execute(select(workers).order_by(workers.c.started_at, workers.c.worker_id))
    ]
    held = [
        Lease(*r) for r in conn.execute(
            select(leases.c.task_id, leases.c.worker_id, leases.c.acquired_at, leases.c.expires_at)
            .where(leases.c.worker_id.is_not(None)).order_by(leases.c.task_id)
        )
    ]
    return now, found, held


def _free(conn: Connection, where) -> None:
    conn.execute(update(leases).where(where).values(worker_id=None, acquired_at=None, expires_at=0.0))


def _insert(conn: Connection):
    """INSERT with ON CONFLICT, in the dialect's own construct (both have one; Core's plain insert has not)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    return dialect_insert(leases)

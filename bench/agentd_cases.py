"""The agentd measurements: batched fill, one-per-commit appends, 16 concurrent appenders, replay, size.

Every function takes an open `EventStore` (default settings: WAL, synchronous=full) and returns what
it measured; none of them asserts anything about the numbers.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sqlite3
import threading
from dataclasses import dataclass

from store import log, replay
from store.events import decode
from store.eventstore import EventStore
from store.ids import new_task_id
from timing import Rate, Stopwatch, checkpoint_and_size, table_bytes
from workload import EventPool, task_submitted

BATCH = 1000
WRITERS = 16


def store_url(folder: str) -> str:
    return f"sqlite:///{os.path.join(folder, 'agentd.db')}"


def db_path(store: EventStore) -> str:
    return store.engines.write.url.database


class CommitCounter:
    """Counts the commits the store's writer makes inside the block (one per group-committed batch).

    `with CommitCounter(store) as counter: ...`
    """

    def __init__(self, store: EventStore) -> None:
        self.stats = store.writer_stats
        self.commits = 0

    def __enter__(self) -> CommitCounter:
        self._before = self.stats.commits
        return self

    def __exit__(self, *exc: object) -> None:
        self.commits = self.stats.commits - self._before


def start_task(store: EventStore, n: int) -> str:
    """Submit a fresh task (untimed) and return its stream id."""
    task_id = new_task_id()
    store.append(task_id, [task_submitted(n)])
    return task_id


# -- 3. batched appends: the fill ----------------------------------------------------------------


def fill(store: EventStore, pool: EventPool, n_events: int) -> Rate:
    """Append `n_events` in commits of BATCH events; each batch is a new task: TaskSubmitted + steps."""
    written = 0
    with Stopwatch() as sw:
        while written < n_events:
            size = min(BATCH, n_events - written)
            # Each task from the pool's first step: a step cut across two tasks would be refused.
            batch = [task_submitted(written // BATCH)] + pool.take(pool.stream(), size - 1)
            store.append(new_task_id(), batch)
            written += size
    return Rate(written, sw.seconds)


# -- 1. one event per commit, one appender -------------------------------------------------------


def single_appends(store: EventStore, pool: EventPool, ops: int) -> Rate:
    """`ops` sequential `store.append(task, [event])` calls to one task; each one waits for its fsync."""
    task_id = start_task(store, 0)
    events = pool.stream()
    with Stopwatch() as sw:
        for _ in range(ops):
            store.append(task_id, [next(events)])
    return Rate(ops, sw.seconds)


# -- 2. sixteen concurrent appenders ------------------------------------------------------------


@dataclass(frozen=True)
class GroupCommit:
    rate: Rate
    commits: int

    @property
    def mean_batch(self) -> float:
        return self.rate.count / self.commits if self.commits else float("nan")


def concurrent_appends(
    store: EventStore, pool: EventPool, ops: int, writers: int = WRITERS, events_per_append: int = 1
) -> GroupCommit:
    """`writers` threads, each appending `events_per_append` events per call to its own task, `ops`
    appends in all. With 4 events per append, one append is one agent step, as one LangGraph put is."""
    per_writer = ops // writers
    tasks = [start_task(store, w) for w in range(writers)]
    start = threading.Barrier(writers + 1)

    def appender(w: int) -> None:
        events = pool.stream(offset=w * 37)
        start.wait()
        for _ in range(per_writer):
            store.append(tasks[w], pool.take(events, events_per_append))

    threads = [threading.Thread(target=appender, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    with CommitCounter(store) as counter:
        start.wait()
        with Stopwatch() as sw:
            for t in threads:
                t.join()
    return GroupCommit(Rate(per_writer * writers, sw.seconds), counter.commits)


def concurrent_appends_async(store: EventStore, pool: EventPool, ops: int, writers: int = WRITERS) -> GroupCommit:
    """The same as `concurrent_appends`, with `writers` asyncio tasks on one loop calling `append_async`."""
    per_writer = ops // writers
    tasks = [start_task(store, w) for w in range(writers)]

    async def appender(w: int) -> None:
        events = pool.stream(offset=w * 37)
        for _ in range(per_writer):
            await store.append_async(tasks[w], [next(events)])

    async def all_appenders() -> None:
        await asyncio.gather(*(appender(w) for w in range(writers)))

    with CommitCounter(store) as counter, Stopwatch() as sw:
        asyncio.run(all_appenders())
    return GroupCommit(Rate(per_writer * writers, sw.seconds), counter.commits)


# -- 4. replay ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replay:
    rebuild: Rate
    """Events folded per second, as `replay.rebuild_into` times itself (the scratch schema excluded)."""
    rebuild_wall: Rate
    """The same call timed from outside, scratch database creation included."""


def rebuild(store: EventStore, folder: str, name: str = "rebuild.db") -> Replay:
    scratch = f"sqlite:///{os.path.join(folder, name)}"
    with Stopwatch() as sw, store.reading() as conn:
        result = replay.rebuild_into(conn, scratch)
    return Replay(Rate(result.events, result.seconds), Rate(result.events, sw.seconds))


def verify(store: EventStore, folder: str, name: str = "verify.db") -> Rate:
    """`replay.verify`: rebuild, then compare every projection row with the live one."""
    scratch = f"sqlite:///{os.path.join(folder, name)}"
    with Stopwatch() as sw, store.reading() as conn:
        result = replay.verify(conn, scratch)
    return Rate(result.events, sw.seconds)


# -- what the machine allows for the same work ----------------------------------------------------


def log_rows(store: EventStore, limit: int) -> tuple[list[str], list[tuple]]:
    """The DDL of the events table and its indexes, and its first `limit` rows exactly as stored."""
    conn = sqlite3.connect(db_path(store))
    try:
        ddl = [sql for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'events' AND type IN ('table', 'index') "
            "AND sql IS NOT NULL ORDER BY type DESC")]
        rows = conn.execute("SELECT * FROM events ORDER BY seq LIMIT ?", (limit,)).fetchall()
    finally:
        conn.close()
    return ddl, rows


def decode_only(store: EventStore) -> Rate:
    """Every payload of the log validated into its event class, and nothing else: no fold, no writes.
    Rebuild does this and more per event, so this rate bounds it from above."""
    with store.reading() as conn:
        raw = list(log.iter_raw(conn))
    gc.disable()  # as replay does
    try:
        with Stopwatch() as sw:
            for r in raw:
                decode(r.type, r.schema_version, r.payload, r.seq)
    finally:
        gc.enable()
    return Rate(len(raw), sw.seconds)


# -- 5. size --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    total_bytes: int
    events: int
    by_table: dict[str, int]

    @property
    def per_event(self) -> float:
        return self.total_bytes / self.events

    @property
    def log_per_event(self) -> float:
        return self.by_table.get("events", 0) / self.events


def size(store: EventStore, events: int) -> Size:
    """Bytes of agentd.db plus -wal after a TRUNCATE checkpoint; the store must be idle."""
    path = db_path(store)
    total = checkpoint_and_size(path)
    return Size(total, events, table_bytes(path))

"""The anchors: LangGraph's SqliteSaver and the eventsourcing library's SQLite recorder, same machine.

Both are filled to the same N rows as agentd before their per-commit figures are taken, each in its
own folder. Neither library sets `PRAGMA synchronous`, so they run with SQLite's compiled default
(recorded in the results; FULL on the usual builds), and both switch the database to WAL.

LangGraph: one `put` per agent step. A checkpoint holds the step's state: the last assistant message
and tool result, the artifact just read, the step counter, with channel versions and versions_seen as
the Pregel loop would write them. One put records roughly what agentd records in one step of four
events (see workload.py).

eventsourcing: `SQLiteApplicationRecorder.insert_events` (the recorder with a global notification
order, like agentd's seq), given `StoredEvent`s whose state is the JSON of the same agentd events. It
is the recorder alone: no mapper, no transcoder, no projections.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from typing import Iterator

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from timing import Rate, Stopwatch, checkpoint_and_size, pragmas
from workload import MIX, EventPool, payload_bytes

BATCH = 1000
WRITERS = 16
STEPS_PER_THREAD = 1000
"""Checkpoints per LangGraph thread during the fill, as agentd's fill puts 1000 events in a task."""


# -- LangGraph --------------------------------------------------------------------------------------


def step_values(pool: EventPool, step: int) -> dict:
    """A LangGraph state after one agent step, built from the same step agentd records as four events."""
    start = (step * 4) % len(pool.events)
    model, proposed, executed, read = pool.events[start : start + 4]
    return {
        "goal": "Fix the failing date parsing and add a regression test",
        "messages": [
            {"role": "assistant", "content": model.output, "tool_calls": [
                {"id": proposed.call_id, "name": proposed.tool, "args": proposed.arguments}
            ]},
            {"role": "tool", "tool_call_id": executed.call_id, "content": executed.observation},
        ],
        "artifacts": [{"path": read.path, "sha256": read.sha256, "size": read.size}],
        "steps": step,
        "tokens_used": 2000 * step,
    }


class LangGraphThread:
    """One LangGraph thread: the arguments of each step's `put`, each checkpoint the child of the last."""

    CHANNELS = ("goal", "messages", "artifacts", "steps", "tokens_used")

    def __init__(self, saver: SqliteSaver, pool: EventPool, thread_id: str) -> None:
        self.saver = saver
        self.pool = pool
        self.thread_id = thread_id
        self.checkpoint = empty_checkpoint()
        self.step = 0

    def next_step(self) -> tuple:
        """The arguments of the next `put`: (config naming the parent, checkpoint, metadata, new_versions)."""
        self.step += 1
        prev = self.checkpoint
        versions = {c: self.saver.get_next_version(prev["channel_versions"].get(c), None) for c in self.CHANNELS}
        base = {
            **prev,
            "channel_values": step_values(self.pool, self.step),
            "channel_versions": versions,
            "versions_seen": {"agent": dict(prev["channel_versions"]), "tools": dict(prev["channel_versions"])},
        }
        checkpoint = create_checkpoint(base, None, self.step)
        config = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        if self.step > 1:
            config["configurable"]["checkpoint_id"] = prev["id"]
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        self.checkpoint = checkpoint
        return config, checkpoint, metadata, versions

    def prepared(self, n: int) -> list[tuple]:
        """The next `n` steps' put arguments, built ahead so that only `put` is timed."""
        return [self.next_step() for _ in range(n)]


def checkpoint_size(saver: SqliteSaver, pool: EventPool) -> int:
    """Serialized bytes of one typical checkpoint (the blob `put` stores)."""
    _, checkpoint, _, _ = LangGraphThread(saver, pool, "probe").prepared(2)[1]
    return len(saver.serde.dumps_typed(checkpoint)[1])


class LangGraphBench:
    """A SqliteSaver on its own database in `folder`; `with LangGraphBench(folder, pool) as lg: ...`."""

    def __init__(self, folder: str, pool: EventPool) -> None:
        self.path = os.path.join(folder, "langgraph.db")
        self.pool = pool
        # check_same_thread=False as LangGraph's own docs do: the saver serialises its calls with a lock.
        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.settings = pragmas(self.conn)
        self.runs = 0

    def __enter__(self) -> LangGraphBench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def _thread_id(self, kind: str) -> str:
        self.runs += 1
        return f"{kind}-{self.runs}"

    def fill(self, n: int) -> None:
        """Put `n` checkpoints (untimed, synchronous=OFF for speed), then restore the default."""
        default = self.conn.execute("PRAGMA synchronous").fetchone()[0]
        self.conn.execute("PRAGMA synchronous=OFF")
        try:
            done = 0
            while done < n:
                thread = LangGraphThread(self.saver, self.pool, self._thread_id("fill"))
                steps = min(STEPS_PER_THREAD, n - done)
                for _ in range(steps):
                    self.saver.put(*thread.next_step())
                done += steps
        finally:
            self.conn.execute(f"PRAGMA synchronous={int(default)}")

    def size_bytes(self) -> int:
        return checkpoint_and_size(self.path)

    def checkpoint_bytes(self) -> int:
        return checkpoint_size(self.saver, self.pool)

    def single(self, ops: int) -> Rate:
        """`ops` sequential puts on one LangGraph thread, each committed (one fsync) before the next."""
        steps = LangGraphThread(self.saver, self.pool, self._thread_id("single")).prepared(ops)
        with Stopwatch() as sw:
            for args in steps:
                self.saver.put(*args)
        return Rate(ops, sw.seconds)

    def threads(self, ops: int, writers: int = WRITERS) -> Rate:
        """`writers` Python threads, each putting its own LangGraph thread's steps, `ops` puts in all.

        The saver takes its lock around every put and commits each put on its own.
        """
        per_writer = ops // writers
        steps = [
            LangGraphThread(self.saver, self.pool, self._thread_id("concurrent")).prepared(per_writer)
            for _ in range(writers)
        ]
        start = threading.Barrier(writers + 1)

        def putter(w: int) -> None:
            start.wait()
            for args in steps[w]:
                self.saver.put(*args)

        workers = [threading.Thread(target=putter, args=(w,)) for w in range(writers)]
        for t in workers:
            t.start()
        start.wait()
        with Stopwatch() as sw:
            for t in workers:
                t.join()
        return Rate(per_writer * writers, sw.seconds)


# -- eventsourcing ----------------------------------------------------------------------------------


class StoredEvents:
    """StoredEvents for one aggregate at a time, with the agentd events' JSON as their state."""

    def __init__(self, pool: EventPool) -> None:
        self.payloads = payload_bytes(pool.events)
        self.topics = [f"agentd.bench:{MIX[i % 4]}" for i in range(len(self.payloads))]
        self.cursor = 0

    def for_aggregate(self, originator_id: uuid.UUID, first_version: int, n: int) -> list[StoredEvent]:
        out = []
        for v in range(first_version, first_version + n):
            i = self.cursor % len(self.payloads)
            self.cursor += 1
            out.append(StoredEvent(originator_id, v, self.topics[i], self.payloads[i]))
        return out

    def one_by_one(self, originator_id: uuid.UUID) -> Iterator[StoredEvent]:
        version = 1
        while True:
            yield self.for_aggregate(originator_id, version, 1)[0]
            version += 1


class EventsourcingBench:
    """A SQLiteApplicationRecorder on its own database in `folder`; use it in a `with` block."""

    def __init__(self, folder: str, pool: EventPool) -> None:
        self.path = os.path.join(folder, "eventsourcing.db")
        self.datastore = SQLiteDatastore(db_name=self.path)
        self.recorder = SQLiteApplicationRecorder(self.datastore)
        self.recorder.create_table()
        self.stored = StoredEvents(pool)
        with self.datastore.get_connection(commit=False) as conn:
            self.settings = pragmas(conn._sqlite_conn)

    def __enter__(self) -> EventsourcingBench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.datastore.close()

    def batched(self, n: int) -> Rate:
        """Fill to `n` with one `insert_events` of BATCH events per call, each batch a new aggregate."""
        written = 0
        with Stopwatch() as sw:
            while written < n:
                size = min(BATCH, n - written)
                self.recorder.insert_events(self.stored.for_aggregate(uuid.uuid4(), 1, size))
                written += size
        return Rate(written, sw.seconds)

    def size_bytes(self) -> int:
        return checkpoint_and_size(self.path)

    def single(self, ops: int) -> Rate:
        """`ops` sequential `insert_events([one event])` calls to one new aggregate."""
        events = self.stored.one_by_one(uuid.uuid4())
        prepared = [next(events) for _ in range(ops)]
        with Stopwatch() as sw:
            for e in prepared:
                self.recorder.insert_events([e])
        return Rate(ops, sw.seconds)

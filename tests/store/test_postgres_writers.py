"""Several processes appending to one PostgreSQL log: one gapless order, one chain, every event once.

Each process has its own store and its own writer; only the database orders them. A reader follows
the log by `seq > cursor` while they write, as a worker's notification drain or the event stream does.
"""

from __future__ import annotations

import multiprocessing
import time

import pytest

from store import EventStore
from store.errors import ConcurrencyConflict
from store.events import DocumentAdded
from tests.helpers.postgres import fresh_schema, unreachable

_WHY = unreachable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

WRITERS = 8
APPENDS = 60


def event(text: str) -> DocumentAdded:
    # Any event of a stream that is not a task's: the writers' order is the point, not the payload.
    return DocumentAdded(doc_id=text, version="v1", sha256="0" * 64, source="bench", tenants=("*",),
                         scope="general", authority=1.0)


@pytest.fixture
def pg_url():
    yield from fresh_schema()


def _append_many(url: str, writer: int, appends: int, start) -> None:
    """One process: its own stream, one event per append, and a share of appends to one shared stream
    with the version it last read, retried on conflict (optimistic concurrency across processes)."""
    with EventStore(url) as store:
        start.wait()
        for n in range(appends):
            store.append(f"w-{writer}", [event(f"{writer}:{n}")], actor=f"writer-{writer}")
            if n % 6 == 0:
                while True:
                    try:
                        version = store.stream_version("shared")
                        store.append("shared", [event(f"{writer}:{n}")], expected_version=version,
                                     actor=f"writer-{writer}")
                        break
                    except ConcurrencyConflict:
                        continue


def test_eight_processes_append_one_gapless_chained_log_that_a_follower_reads_once_in_order(pg_url) -> None:
    ctx = multiprocessing.get_context("spawn")
    with EventStore(pg_url) as store:
        start = ctx.Event()
        workers = [ctx.Process(target=_append_many, args=(pg_url, w, APPENDS, start)) for w in range(WRITERS)]
        for p in workers:
            p.start()
        start.set()
        seen: list[int] = []
        cursor = 0
        while any(p.is_alive() for p in workers) or cursor < store.last_seq():
            with store.reading() as conn:
                from store import log

                batch = list(log.iter_records(conn, after=cursor))
            for rec in batch:
                seen.append(rec.seq)
                cursor = rec.seq
            time.sleep(0.005)
        for p in workers:
            p.join()
            assert p.exitcode == 0
        shared = APPENDS // 6
        total = WRITERS * (APPENDS + shared)
        # Every event once, in order, with no seq skipped by a follower that only ever asked for seq > cursor.
        assert seen == list(range(1, total + 1))
        for w in range(WRITERS):
            assert [r.event.doc_id for r in store.read_stream(f"w-{w}")] == [f"{w}:{n}" for n in range(APPENDS)]
        assert len(store.read_stream("shared")) == WRITERS * shared
        with store.reading() as conn:
            from store import audit

            audit.check_log(conn, None)

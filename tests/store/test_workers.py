"""Workers and leases: each runnable task is held by one worker at a time, until it stops or dies.

Run on a SQLite file and on the local PostgreSQL. The race is run for real on PostgreSQL: several
processes claim the same tasks at once, and every task is taken by exactly one of them.
"""

from __future__ import annotations

import multiprocessing
import time

import pytest

from store import EventStore
from store.errors import StoreError
from tests.helpers.postgres import fresh_schema, unreachable

_WHY = unreachable()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'agentd.db'}"
        return
    if _WHY is not None:
        pytest.skip(_WHY)
    yield from fresh_schema()


def test_a_claimed_task_is_not_another_workers_until_released(url: str) -> None:
    with EventStore(url) as store:
        table = store.workers
        table.register("w1", "host-a", 101)
        table.register("w2", "host-b", 202)
        assert table.claim("t-1", "w1", ttl_s=30)
        assert not table.claim("t-1", "w2", ttl_s=30)
        assert table.claim("t-1", "w1", ttl_s=30), "the holder renews its own claim"
        assert table.held_elsewhere("w2") == {"t-1"}
        assert table.held_elsewhere("w1") == set()
        table.release("w1", ["t-1"])
        assert table.claim("t-1", "w2", ttl_s=30)


def test_a_lease_that_ran_out_is_anyones_and_its_old_holder_learns_it_at_its_heartbeat(url: str) -> None:
    with EventStore(url) as store:
        table = store.workers
        table.register("w1", "host-a", 101)
        table.register("w2", "host-b", 202)
        assert table.claim("t-1", "w1", ttl_s=0.2)
        assert table.claim("t-2", "w1", ttl_s=30)
        time.sleep(0.3)
        assert table.claim("t-1", "w2", ttl_s=30), "w1 stopped renewing: its lease expired"
        assert table.heartbeat("w1", ttl_s=30) == {"t-2"}


def test_a_heartbeat_renews_every_lease_the_worker_holds(url: str) -> None:
    with EventStore(url) as store:
        table = store.workers
        table.register("w1", "host-a", 101)
        table.register("w2", "host-b", 202)
        assert table.claim("t-1", "w1", ttl_s=0.3)
        time.sleep(0.15)
        table.heartbeat("w1", ttl_s=30)
        time.sleep(0.3)
        assert not table.claim("t-1", "w2", ttl_s=30)


def test_a_worker_that_stops_hands_its_tasks_back_at_once(url: str) -> None:
    with EventStore(url) as store:
        table = store.workers
        table.register("w1", "host-a", 101, address="http://a:8765/", workspaces=["/srv/a"])
        table.register("w2", "host-b", 202)
        assert table.claim("t-1", "w1", ttl_s=300)
        table.stop("w1")
        assert table.claim("t-1", "w2", ttl_s=30)
        now, found, held = table.snapshot()
        w1 = next(w for w in found if w.worker_id == "w1")
        assert w1.stopped_at is not None and w1.stopped_at <= now
        assert w1.workspaces == ("/srv/a",) and w1.address == "http://a:8765/"
        assert [(lease.task_id, lease.worker_id) for lease in held] == [("t-1", "w2")]


def test_a_stopped_or_unknown_worker_cannot_renew(url: str) -> None:
    with EventStore(url) as store:
        table = store.workers
        with pytest.raises(StoreError, match="not registered"):
            table.heartbeat("nobody", ttl_s=30)
        table.register("w1", "host-a", 101)
        table.stop("w1")
        with pytest.raises(StoreError, match="not registered"):
            table.heartbeat("w1", ttl_s=30)


TASKS = 40
CLAIMANTS = 6


def _claim_all(url: str, worker: str, start, out) -> None:
    with EventStore(url) as store:
        table = store.workers
        table.register(worker, "localhost", 0)
        start.wait()
        out.put((worker, [t for t in (f"t-{i}" for i in range(TASKS)) if table.claim(t, worker, ttl_s=300)]))


def test_processes_claiming_the_same_tasks_at_once_take_each_exactly_once() -> None:
    if _WHY is not None:
        pytest.skip(_WHY)
    for url in fresh_schema():
        EventStore(url).close()  # the schema, made once before the race
        ctx = multiprocessing.get_context("spawn")
        start, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_claim_all, args=(url, f"w{i}", start, out)) for i in range(CLAIMANTS)]
        for p in procs:
            p.start()
        time.sleep(1.0)
        start.set()
        taken = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        claimed = [t for _, tasks in taken for t in tasks]
        assert sorted(claimed) == sorted(f"t-{i}" for i in range(TASKS))
        with EventStore(url) as store:
            _, _, held = store.workers.snapshot()
        owner = {worker: set(tasks) for worker, tasks in taken}
        assert all(lease.task_id in owner[lease.worker_id] for lease in held)

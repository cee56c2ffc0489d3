"""The store contract on SQLite, plus what only SQLite has: pragmas, durability settings, file errors."""

from __future__ import annotations

import pytest

from store import ConcurrencyConflict, EventStore
from store.events import ModelCalled, TaskPhase, TaskPhaseChanged
from tests.helpers.store_contract import StoreContract, submitted


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, db_url: str):
        with EventStore(db_url) as s:
            yield s


def test_sqlite_is_configured_for_wal_durability_and_foreign_keys(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.append("t-a", [submitted()])
        names = ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        pragmas = store.in_write_transaction(
            lambda conn: {p: conn.exec_driver_sql(f"PRAGMA {p}").scalar() for p in names}
        )
    assert pragmas == {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "busy_timeout": 5000}


def test_synchronous_and_busy_timeout_are_configurable(db_url: str) -> None:
    with EventStore(db_url, synchronous="normal", busy_timeout_ms=250) as store:
        with store.engines.read.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 250


def test_readers_are_not_blocked_by_an_open_write_transaction(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.append("t-a", [submitted()])
        seen = []

        def write_and_read(conn) -> None:
            conn.exec_driver_sql("INSERT INTO events VALUES (99, 's', 1, 'T', 1, '{}', 'now', 'a', NULL, NULL, NULL)")
            # The writer holds the lock with an uncommitted row; a reader sees the committed snapshot at once.
            seen.append(store.last_seq())
            raise RuntimeError("roll back")

        with pytest.raises(RuntimeError):
            store.in_write_transaction(write_and_read)
        assert seen == [1]
        assert store.last_seq() == 1


def test_a_write_by_another_connection_between_batches_is_seen_by_the_next_append(db_url: str) -> None:
    """The writer remembers stream versions between its batches; another writer's commit must void that."""
    with EventStore(db_url) as mine, EventStore(db_url) as theirs:
        mine.append("t-a", [submitted()], expected_version=0)
        theirs.append("t-a", [TaskPhaseChanged(phase=TaskPhase.RUNNING)], expected_version=1)
        with pytest.raises(ConcurrencyConflict) as err:
            mine.append("t-a", [TaskPhaseChanged(phase=TaskPhase.CANCELLED)], expected_version=1)
        assert err.value.actual == 2
        [rec] = mine.append("t-a", [TaskPhaseChanged(phase=TaskPhase.COMPLETED)], expected_version=2)
        assert (rec.seq, rec.stream_version) == (3, 3)
        assert mine.task("t-a").summary.phase == "completed"
        assert theirs.task("t-a").summary.version == 3


@pytest.mark.anyio
async def test_many_async_appenders_share_commits_and_all_land(db_url: str) -> None:
    import anyio

    with EventStore(db_url) as store:
        async def appender(n: int) -> None:
            await store.append_async(f"t-{n}", [submitted()], expected_version=0)
            for version in range(1, 20):
                await store.append_async(
                    f"t-{n}", [ModelCalled(call_index=version, model="m", prompt_tokens=1, completion_tokens=1)],
                    expected_version=version,
                )

        async with anyio.create_task_group() as tg:
            for n in range(16):
                tg.start_soon(appender, n)
        assert store.last_seq() == 16 * 20
        assert all(store.task(f"t-{n}").summary.steps == 19 for n in range(16))


@pytest.mark.anyio
async def test_an_async_append_cancelled_while_queued_is_dropped_and_its_batch_still_lands(db_url: str) -> None:
    import threading

    import anyio

    with EventStore(db_url) as store:
        # A bulk call holds the writer while the queue fills behind it: the cancelled async append and a
        # plain append end up in the same batch.
        gate = threading.Event()
        leader = threading.Thread(target=store.in_write_transaction, args=(lambda conn: gate.wait(),))
        leader.start()
        await anyio.sleep(0.05)

        async def cancelled_appender() -> None:
            await store.append_async("t-cancelled", [submitted()], expected_version=0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancelled_appender)
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()

        follower = threading.Thread(target=store.append, args=("t-kept", [submitted()]))
        follower.start()
        await anyio.sleep(0.05)
        gate.set()
        follower.join(timeout=10)
        leader.join(timeout=10)

        assert not follower.is_alive(), "an appender batched with a cancelled one was never answered"
        assert store.stream_version("t-cancelled") == 0
        assert store.stream_version("t-kept") == 1

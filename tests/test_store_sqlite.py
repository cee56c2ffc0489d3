"""The store contract on SQLite, plus what only SQLite has: pragmas, durability settings, file errors."""

from __future__ import annotations

import pytest

from store import EventStore
from tests.store_contract import StoreContract, submitted


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, db_url: str):
        with EventStore(db_url) as s:
            yield s


def test_sqlite_is_configured_for_wal_durability_and_foreign_keys(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.append("t-a", [submitted()])
        names = ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        pragmas = store.in_write_transaction(lambda conn: {p: conn.exec_driver_sql(f"PRAGMA {p}").scalar() for p in names})
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
            conn.exec_driver_sql("INSERT INTO events VALUES (99, 's', 1, 'T', 1, '{}', 'now', 'a', NULL, NULL)")
            # The writer holds the lock with an uncommitted row; a reader sees the committed snapshot at once.
            seen.append(store.last_seq())
            raise RuntimeError("roll back")

        with pytest.raises(RuntimeError):
            store.in_write_transaction(write_and_read)
        assert seen == [1]
        assert store.last_seq() == 1

"""Wake-ups on PostgreSQL: a commit to the log is heard by a listener on another connection."""

from __future__ import annotations

import pytest

from store import EventStore
from store.errors import StoreError
from store.events import DocumentAdded
from store.wakeup import LogWakeups
from tests.helpers.postgres import fresh_schema, unreachable

_WHY = unreachable()


@pytest.fixture
def pg_url():
    if _WHY is not None:
        pytest.skip(_WHY)
    yield from fresh_schema()


def test_a_commit_from_another_store_is_heard_and_silence_is_not(pg_url) -> None:
    with EventStore(pg_url) as store, LogWakeups(pg_url) as wakeups:
        assert not wakeups.wait(0.2)
        store.append("knowledge", [DocumentAdded(doc_id="d", version="v1", sha256="0" * 64, source="s",
                                                 tenants=("*",), scope="general", authority=1.0)])
        assert wakeups.wait(5)
        assert not wakeups.wait(0.2), "one commit, one wake-up"


def test_a_server_out_of_reach_is_a_store_error_not_a_driver_one() -> None:
    with pytest.raises(StoreError, match="cannot listen for commits"):
        LogWakeups("postgresql+psycopg://postgres@127.0.0.1:1/test")

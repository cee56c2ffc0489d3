"""The store contract on PostgreSQL, each test in a schema of its own (skipped without a server or driver)."""

from __future__ import annotations

import pytest

from store import EventStore
from tests.helpers.postgres import fresh_schema, unreachable
from tests.helpers.store_contract import StoreContract

_WHY = unreachable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


@pytest.fixture
def pg_url():
    """A URL whose connections see only a fresh schema, dropped afterwards."""
    yield from fresh_schema()


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_url: str):
        with EventStore(pg_url) as s:
            yield s


def test_upgrading_a_log_from_before_the_chain_hashes_it_and_keeps_its_open_calls(pg_url: str, tmp_path) -> None:
    from alembic import command
    from sqlalchemy import create_engine, text

    from store import audit
    from store.events import TaskSubmitted, ToolCallExecuted, ToolCallProposed, ToolCallStarted
    from store.migrate import alembic_config
    from store.replay import verify

    engine = create_engine(pg_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0003")
        insert = text(
            "INSERT INTO events VALUES (:seq, 't-1', :seq, :type, 1, :payload, '2026-11-30T00:00:00Z', 'a', NULL, NULL)"
        )
        logged = [TaskSubmitted(goal="g", workspace="/w"), ToolCallProposed(call_id="c1", tool="shell")]
        for seq, e in enumerate(logged, start=1):
            conn.execute(insert, {"seq": seq, "type": type(e).__name__, "payload": e.model_dump_json()})
        conn.execute(text(
            "INSERT INTO tasks VALUES ('t-1', 'g', '/w', 'default', 'submitted', 40, 200000, 0, 0, NULL, "
            "'2026-11-30T00:00:00Z', '2026-11-30T00:00:00Z', NULL, 2, 2)"
        ))
    engine.dispose()
    with EventStore(pg_url) as store:
        store.append("t-1", [ToolCallStarted(call_id="c1", tool="shell", idempotent=False),
                             ToolCallExecuted(call_id="c1", tool="shell", status="ok")])
        with store.reading() as conn:
            audit.check_log(conn, None)
            assert verify(conn, f"sqlite:///{tmp_path / 'rebuilt.db'}").events == 4

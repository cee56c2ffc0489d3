"""Scoped memory in its table: the projection holds what the fold of the log holds, is read by scope in
the query, replays, and is filled from the log when an older database is upgraded."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine

from runtime.memory import from_rows, memories
from store import EventStore
from store.events import MEMORY_STREAM, MemoryForgotten, MemoryRecorded
from store.replay import verify


def _recorded(memory_id: str, text: str, *, subject: str = "u1", tenant: str = "t1", **kw) -> MemoryRecorded:
    return MemoryRecorded(memory_id=memory_id, subject=subject, tenant=tenant, purpose="support", text=text,
                          source="system_record", **kw)


M1, M2, M3 = "m-0000000001", "m-0000000002", "m-0000000003"


def _history(store: EventStore) -> None:
    """Every rule of the fold once: recorded, recorded again, forgotten, recorded after it was forgotten,
    forgotten twice, another subject's and another tenant's."""
    store.append(MEMORY_STREAM, [_recorded(M1, "Key created 3 days ago")], actor="test")
    store.append(MEMORY_STREAM, [_recorded(M2, "Prefers email", subject="u2", review_at="2027-01-01T00:00:00+00:00")],
                 actor="test")
    store.append(MEMORY_STREAM, [_recorded(M3, "On the gold plan", tenant="t2")], actor="test")
    store.append(MEMORY_STREAM, [_recorded(M1, "Key rotated today", expires_at="2027-02-01T00:00:00+00:00")],
                 actor="test")
    store.append(MEMORY_STREAM, [MemoryForgotten(memory_id=M2, reason="asked to")], actor="test")
    store.append(MEMORY_STREAM, [_recorded(M2, "Prefers email again", subject="u2")], actor="test")
    store.append(MEMORY_STREAM, [MemoryForgotten(memory_id=M2, reason="asked twice")], actor="test")


def test_the_memory_table_holds_what_the_fold_of_the_log_holds(store: EventStore, tmp_path: Path) -> None:
    _history(store)
    folded = memories(store.read_stream(MEMORY_STREAM))
    table = from_rows(store.memories())
    assert table == folded
    assert list(table) == [M1, M2, M3]
    assert table[M1].text == "Key rotated today" and table[M1].expires_at is not None
    assert table[M2].text == "" and table[M2].forgotten_reason == "asked twice"
    with store.reading() as conn:
        verify(conn, f"sqlite:///{tmp_path / 'rebuilt.db'}")


def test_a_decisions_memories_are_read_by_subject_and_tenant_in_the_query(store: EventStore) -> None:
    _history(store)
    assert [r.memory_id for r in store.memories(subject="u1", tenant="t1")] == [M1]
    assert [r.memory_id for r in store.memories(tenant="t2")] == [M3]
    assert [r.memory_id for r in store.memories(subject="u1", tenant="t2")] == [M3]
    assert store.memories(subject="u2", tenant="t2") == []


def test_an_older_database_gets_its_memory_table_filled_from_the_log(db_url: str, tmp_path: Path) -> None:
    with EventStore(db_url) as store:
        _history(store)
        expected = from_rows(store.memories())
    # The database as agentd left it before memory had a table: the log holds the events, nothing else.
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE memories")
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0008'")
    engine.dispose()
    with EventStore(db_url) as store:
        assert from_rows(store.memories()) == expected
        with store.reading() as conn:
            verify(conn, f"sqlite:///{tmp_path / 'rebuilt.db'}")

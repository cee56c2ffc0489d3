"""Writing memory through code's checks into a real SQLite store: what is refused and why, retention,
redaction down to the database file's bytes, and forgetting that a fresh fold of the log keeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runtime.errors import InvalidCommand, NotFound
from runtime.memory import forget, load, memories, propose
from store import EventStore
from store.events import MEMORY_STREAM, MemoryForgotten, MemoryRecorded

NOW = datetime(2026, 10, 2, tzinfo=UTC)
SCOPE = {"subject": "u1", "tenant": "t1", "purpose": "support"}
KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e"
PASSWORD = "Tr0ub4dor&3"
EMAIL = "alice.smith@example.com"


def add(store, text: str = "Key created 3 days ago", **kw) -> str:
    fields = {**SCOPE, "source": "system_record", "by": "test", "now": NOW, **kw}
    memory_id, _ = propose(store, text=text, **fields)
    return memory_id


def folded(store):
    return memories(store.read_stream(MEMORY_STREAM))


def test_a_proposed_memory_is_recorded_with_its_scope_source_and_expiry(store) -> None:
    memory_id = add(store, expires_at=NOW + timedelta(days=30))
    [rec] = store.read_stream(MEMORY_STREAM)
    assert rec.actor == "test" and isinstance(rec.event, MemoryRecorded)
    m = folded(store)[memory_id]
    assert (m.subject, m.tenant, m.purpose, m.source, m.text) == ("u1", "t1", "support", "system_record",
                                                                  "Key created 3 days ago")
    assert m.expires_at == NOW + timedelta(days=30) and m.review_at is None


@pytest.mark.parametrize(("change", "says"), [
    ({"subject": ""}, "needs a subject"),
    ({"tenant": "  "}, "needs a tenant"),
    ({"purpose": ""}, "needs a purpose"),
    ({"text": ""}, "needs a text"),
    ({"source": "unknown"}, "source 'unknown' is not one of user_stated, system_record, model_inferred"),
    ({"source": "model_inferred"}, "model_inferred memory needs an expiry or a review date"),
    ({"expires_at": NOW - timedelta(seconds=1)}, "has passed already"),
    ({"review_at": NOW}, "has passed already"),
])
def test_a_proposal_that_fails_a_check_is_refused_in_one_line_and_nothing_is_recorded(store, change, says) -> None:
    with pytest.raises(InvalidCommand, match=says) as refused:
        add(store, **change)
    assert "\n" not in str(refused.value)
    assert store.read_stream(MEMORY_STREAM) == []


def test_what_a_model_inferred_is_recorded_once_it_has_a_review_date_or_an_expiry(store) -> None:
    reviewed = add(store, "Prefers short answers", source="model_inferred", review_at=NOW + timedelta(days=7))
    expiring = add(store, "Prefers email", source="model_inferred", expires_at=NOW + timedelta(days=7))
    loaded = load(folded(store), subject="u1", tenant="t1", purposes="support", now=NOW)
    assert [m.memory_id for m in loaded.hypotheses] == [reviewed, expiring] and loaded.facts == ()


def test_the_purposes_retention_sets_the_expiry_when_none_is_given(store) -> None:
    retention = {"support": 90}
    kept = add(store, retention=retention)
    inferred = add(store, "Prefers short answers", source="model_inferred", retention=retention)
    billing = add(store, purpose="billing", retention=retention)
    named = add(store, expires_at=NOW + timedelta(days=5), retention=retention)
    found = folded(store)
    assert found[kept].expires_at == found[inferred].expires_at == NOW + timedelta(days=90)
    assert found[billing].expires_at is None  # no retention named for billing: kept until forgotten
    assert found[named].expires_at == NOW + timedelta(days=5)


def test_secrets_and_personal_data_never_reach_the_database_file(db_url: str, data_dir: Path) -> None:
    with EventStore(db_url) as store:
        memory_id = add(store, f"Key {KEY} fails; password: {PASSWORD}; write to {EMAIL}")
        forget(store, memory_id, f"asked by {EMAIL}", by="test")
    raw = b"".join(p.read_bytes() for p in data_dir.rglob("*") if p.is_file())
    assert b"[redacted:api_key]" in raw and b"[redacted:password]" in raw  # the memory is there, redacted
    for planted in (KEY, PASSWORD, EMAIL, "4f9a8b7c6d5e4f3a2b1c"):
        assert planted.encode() not in raw, planted


def test_a_forgotten_memory_stays_forgotten_in_a_fresh_fold_of_the_same_file(db_url: str) -> None:
    with EventStore(db_url) as store:
        gone = add(store, "Old plan: Free")
        kept = add(store)
        forget(store, gone, "out of date", by="test")
    with EventStore(db_url) as fresh:
        found = folded(fresh)
        types = [type(r.event) for r in fresh.read_stream(MEMORY_STREAM)]
    assert types == [MemoryRecorded, MemoryRecorded, MemoryForgotten]
    assert found[gone].forgotten and found[gone].text == "" and found[gone].forgotten_reason == "out of date"
    loaded = load(found, subject="u1", tenant="t1", purposes="support", now=NOW)
    assert [m.memory_id for m in loaded.facts] == [kept] and loaded.refused == ()


def test_an_id_recorded_again_after_it_was_forgotten_does_not_bring_it_back(store) -> None:
    gone = add(store, "Old plan: Free")
    forget(store, gone, "", by="test")
    again = MemoryRecorded(memory_id=gone, subject="u1", tenant="t1", purpose="support", text="Old plan: Free",
                           source="system_record")
    store.append(MEMORY_STREAM, [again])
    assert folded(store)[gone].forgotten and folded(store)[gone].text == ""


def test_forgetting_an_unknown_memory_is_not_found_and_forgetting_twice_is_refused(store) -> None:
    with pytest.raises(NotFound, match="no memory 'm-0000000000'"):
        forget(store, "m-0000000000", "", by="test")
    memory_id = add(store)
    forget(store, memory_id, "", by="test")
    with pytest.raises(InvalidCommand, match="forgotten already"):
        forget(store, memory_id, "", by="test")
    assert len(store.read_stream(MEMORY_STREAM)) == 2

"""Event values: immutable, registered by name, decoded with upcasting, rejected clearly when invalid."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from store import EventStore, InvalidEvent, StoreError, UnknownEventType
from store.events import Event, TaskSubmitted, decode, event_types, upcaster


class MemoWritten(Event):
    """A test-only event at schema version 3, with two historical shapes to upcast from."""

    schema_version = 3
    text: str
    author: str
    tags: tuple[str, ...] = ()


@upcaster("MemoWritten", from_version=1)
def _note_v1_to_v2(payload: dict) -> dict:
    # Version 1 called the text "body" and had no author.
    return {"text": payload["body"], "author": "unknown"}


@upcaster("MemoWritten", from_version=2)
def _note_v2_to_v3(payload: dict) -> dict:
    return {**payload, "tags": payload.get("tags", [])}


def test_events_are_immutable_values() -> None:
    e = TaskSubmitted(goal="g", workspace="/w")
    with pytest.raises(ValidationError):
        e.goal = "other"  # type: ignore[misc]
    assert e == TaskSubmitted(goal="g", workspace="/w")


def test_event_types_are_registered_by_name_and_named_in_the_past_tense() -> None:
    names = event_types()
    assert "TaskSubmitted" in names and "MemoWritten" in names
    shipped = [n for n in names if n != "MemoWritten"]
    assert all(n.endswith(("ed", "en", "Ran", "Read", "Said")) for n in shipped), shipped


def test_an_old_payload_is_upcast_step_by_step_to_the_current_version() -> None:
    assert decode("MemoWritten", 1, '{"body": "hi"}') == MemoWritten(text="hi", author="unknown")
    assert decode("MemoWritten", 2, '{"text": "hi", "author": "ann"}') == MemoWritten(text="hi", author="ann")
    assert decode("MemoWritten", 3, '{"text": "hi", "author": "ann", "tags": ["x"]}').tags == ("x",)


def test_an_event_written_by_an_older_version_still_loads_from_the_log(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.append("notes", [MemoWritten(text="now", author="ann")])
        from store import log

        row = dict(
            seq=2, stream_id="notes", stream_version=2,
            type="MemoWritten", schema_version=1, payload='{"body": "long ago"}',
            recorded_at="2026-01-01T00:00:00.000000Z", actor="old", causation_id=None, correlation_id=None,
        )
        store.in_write_transaction(lambda conn: conn.execute(log.events.insert(), row))
        assert [r.event.text for r in store.read_stream("notes")] == ["now", "long ago"]


def test_a_payload_newer_than_this_agentd_is_an_error_naming_the_seq() -> None:
    with pytest.raises(StoreError, match="event 7 .*schema version 4"):
        decode("MemoWritten", 4, "{}", seq=7)


def test_an_unknown_type_names_the_type_and_seq() -> None:
    with pytest.raises(UnknownEventType, match="event 12 has unknown type 'Teleported'"):
        decode("Teleported", 1, "{}", seq=12)


def test_an_invalid_payload_names_the_field() -> None:
    with pytest.raises(InvalidEvent, match="event 3 \\(TaskSubmitted\\).*goal"):
        decode("TaskSubmitted", 1, '{"goal": "", "workspace": "/w"}', seq=3)
    with pytest.raises(InvalidEvent, match="not JSON"):
        decode("MemoWritten", 1, "{nope", seq=4)


def test_unknown_fields_are_rejected_rather_than_dropped() -> None:
    with pytest.raises(InvalidEvent, match="sneaky: Extra inputs"):
        decode("TaskSubmitted", 1, '{"goal": "g", "workspace": "/w", "sneaky": 1}', seq=5)


def test_a_manifest_item_without_flags_is_written_as_before_flags_existed_and_one_with_flags_keeps_them() -> None:
    from store.events import ManifestItem

    item = ManifestItem(block="result:c1", kind="observation", source="tool:x", trust="untrusted", sha256="a", tokens=3)
    assert item.model_dump_json() == (
        '{"block":"result:c1","kind":"observation","source":"tool:x","trust":"untrusted","version":null,'
        '"sha256":"a","tokens":3}'
    )
    flagged = item.model_copy(update={"flags": ("tells the model to ignore its instructions",)})
    assert ManifestItem.model_validate_json(flagged.model_dump_json()) == flagged
    scored = item.model_copy(update={"utility": 0.75})
    assert ManifestItem.model_validate_json(scored.model_dump_json()) == scored


def test_a_left_out_item_without_a_score_is_written_as_before_scores_existed() -> None:
    from store.events import LeftOut

    item = LeftOut(source="skill:x", kind="skill", tokens=0, reason="over the skill budget")
    assert item.model_dump_json() == '{"source":"skill:x","kind":"skill","tokens":0,"reason":"over the skill budget"}'
    scored = item.model_copy(update={"kind": "evidence", "utility": 0.1})
    assert LeftOut.model_validate_json(scored.model_dump_json()) == scored


def test_an_evidence_item_without_provenance_is_written_as_before_provenance_existed() -> None:
    from store.events import EvidenceItem

    item = EvidenceItem(cite="memory:m-1", source="memory:user_stated", sha256="a", text="t", utility=1.0, tokens=1)
    assert item.model_dump_json() == (
        '{"cite":"memory:m-1","source":"memory:user_stated","version":null,"sha256":"a","text":"t","utility":1.0,'
        '"tokens":1}'
    )
    ranked = item.model_copy(update={"scope": "general", "relevance": 0.5, "authority": 1.0, "freshness": 0.2})
    assert EvidenceItem.model_validate_json(ranked.model_dump_json()) == ranked

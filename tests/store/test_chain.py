"""The append path's chain (`chain.rows`) gives, row for row, the hash `chain.link` defines, and an
appended event is stored and hashed as `model_dump_json` gives its payload."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from store import EventStore, chain, log
from store.events import TaskSubmitted, decode
from tests.helpers import FIXTURES

# Few values, so that rows share objects as a request's rows do; `copy` adds equal strings that are other
# objects, which must hash the same.
_texts = st.sampled_from(["t-1", "t-2", "agentd", "ann", "2026-12-01T00:00:00.000000Z", 'q"uote\\', "naïve – 日本", ""])
_optional_texts = st.none() | _texts
_ints = st.integers(min_value=0, max_value=2**40)


def copy(value: str | None) -> str | None:
    return None if value is None else "".join(list(value))


# Stand-ins for event classes: `rows` reads only an event's class name and schema version.
_KINDS = {
    (name, v): type(name, (), {"schema_version": v}) for name in ("ModelCalled", "TaskSubmitted") for v in (1, 2, 3)
}


@st.composite
def records(draw) -> tuple:
    """A `Recorded`'s fields, its event standing in for a class, and its payload."""
    record = (draw(_ints), draw(_texts), draw(_ints), draw(_texts), draw(_texts), draw(_optional_texts),
              draw(_optional_texts))
    if draw(st.booleans()):
        record = tuple(copy(v) if isinstance(v, str) else v for v in record)
    kind = _KINDS[draw(st.sampled_from(["ModelCalled", "TaskSubmitted"])), draw(st.integers(1, 3))]
    return (*record, kind()), draw(st.text())


# Generation, not the hashing, is what takes the time on a loaded machine.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prev=st.sampled_from(["", chain.GENESIS, "ab" * 32]), drawn=st.lists(records(), max_size=12))
def test_rows_are_the_records_in_column_order_each_hashed_as_link_does_following_the_row_before(
    prev: str, drawn: list[tuple]
) -> None:
    expected, last = [], prev
    for (seq, stream_id, version, recorded_at, actor, causation, correlation, event), payload in drawn:
        row = (seq, stream_id, version, type(event).__name__, type(event).schema_version, payload, recorded_at,
               actor, causation, correlation)
        last = chain.link(last, row)
        expected.append((*row, last))
    assert chain.rows(prev, [r for r, _ in drawn], [p.encode() for _, p in drawn]) == expected


def test_an_appended_event_is_stored_and_chained_as_model_dump_json_gives_it(db_url: str) -> None:
    """Every event of the recorded log, and a payload outside ASCII, appended one request at a time."""
    lines = [json.loads(line) for line in (FIXTURES / "recorded-log.jsonl").read_text().splitlines()]
    appended = []
    with EventStore(db_url) as store:
        for e in lines:
            if "trailer" in e:
                continue
            event = decode(e["type"], e["schema_version"], json.dumps(e["payload"]))
            store.append(e["stream_id"], [event], actor=e["actor"], causation_id=e["causation_id"])
            appended.append(event)
        unicode = TaskSubmitted(goal="Überprüfe die Daten – 日本語, \"quoted\"", workspace="/w", max_steps=3,
                                max_tokens=100)
        store.append("t-2", [unicode], actor="zoë")
        appended.append(unicode)
        with store.reading() as conn:
            stored = list(log.iter_raw(conn))
    assert [r.payload for r in stored] == [event.model_dump_json() for event in appended]
    prev = chain.GENESIS
    for r in stored:
        prev = chain.link(prev, r[:-1])
        assert r.hash == prev, f"seq {r.seq}"

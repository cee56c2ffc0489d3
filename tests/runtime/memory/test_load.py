"""Loading memory for a decision: the four checks in their order, facts apart from hypotheses, and what
each refused memory was refused for."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, strategies as st

from runtime.memory import CHECKS, Memory, load

NOW = datetime(2026, 10, 2, tzinfo=UTC)
LATER = NOW + timedelta(days=30)


def memory(memory_id: str, subject: str, tenant: str, purpose: str, text: str, source: str,
           expires_at: datetime | None = LATER, review_at: datetime | None = None) -> Memory:
    return Memory(memory_id, subject, tenant, purpose, text, source, "2026-09-01T00:00:00Z", expires_at, review_at)


# The design's five records and its unknown source, for subject u1 of tenant t1 deciding on support.
KEY = memory("m-1", "u1", "t1", "support", "Key created 3 days ago", "system_record")
PREFERS = memory("m-2", "u1", "t1", "support", "Prefers short answers", "model_inferred")
CARD = memory("m-3", "u1", "t1", "billing", "Card ends 4242", "system_record")
OTHER = memory("m-4", "u2", "t1", "support", "Another user's key", "system_record")
OLD_PLAN = memory("m-5", "u1", "t1", "support", "Old plan: Free", "system_record", expires_at=NOW)
UNKNOWN = memory("m-6", "u1", "t1", "support", "Unknown provenance", "unknown")
OTHER_TENANT = memory("m-7", "u1", "t2", "support", "Another tenant's plan", "system_record")


def for_u1(memories, **kw):
    return load(memories, subject="u1", tenant="t1", purposes={"support"}, now=NOW, **kw)


def refusals(loaded) -> dict[str, str]:
    return {r.memory_id: r.check for r in loaded.refused}


def test_the_designs_records_load_one_fact_and_one_hypothesis() -> None:
    loaded = for_u1([KEY, PREFERS, CARD, OTHER, OLD_PLAN])
    assert [m.text for m in loaded.facts] == ["Key created 3 days ago"]
    assert [m.text for m in loaded.hypotheses] == ["Prefers short answers"]


def test_each_record_that_stays_out_is_refused_by_its_own_check() -> None:
    loaded = for_u1([KEY, OTHER_TENANT, CARD, OLD_PLAN, UNKNOWN, OTHER])
    assert [m.memory_id for m in loaded.facts] == ["m-1"]
    assert refusals(loaded) == {"m-7": "scope", "m-3": "purpose", "m-5": "expired", "m-6": "source", "m-4": "scope"}


def test_a_memory_of_unknown_source_never_loads() -> None:
    loaded = for_u1([UNKNOWN])
    assert (loaded.facts, loaded.hypotheses) == ((), ())
    assert [(r.memory_id, r.check) for r in loaded.refused] == [("m-6", "source")]


def test_a_record_failing_several_checks_is_refused_by_the_first_in_the_designs_order() -> None:
    everything_wrong = memory("m-8", "u2", "t2", "billing", "x", "unknown", expires_at=NOW)
    no_purpose_no_source = memory("m-9", "u1", "t1", "billing", "x", "unknown", expires_at=NOW)
    expired_unknown = memory("m-10", "u1", "t1", "support", "x", "unknown", expires_at=NOW - timedelta(days=1))
    loaded = for_u1([everything_wrong, no_purpose_no_source, expired_unknown])
    assert refusals(loaded) == {"m-8": "scope", "m-9": "purpose", "m-10": "expired"}
    assert CHECKS == ("scope", "purpose", "expired", "source")


def test_what_a_model_inferred_loads_only_as_a_hypothesis() -> None:
    loaded = for_u1([PREFERS, KEY])
    assert PREFERS not in loaded.facts and loaded.hypotheses == (PREFERS,)


def test_a_deployment_that_knows_fewer_sources_refuses_the_others_by_the_source_check() -> None:
    loaded = for_u1([PREFERS, KEY], known_sources={"system_record"})
    assert loaded.facts == (KEY,) and loaded.hypotheses == ()
    assert refusals(loaded) == {"m-2": "source"}


def test_a_memory_due_for_review_does_not_load_until_recorded_again() -> None:
    due = memory("m-11", "u1", "t1", "support", "Uses the EU region", "user_stated", expires_at=None,
                 review_at=NOW - timedelta(hours=1))
    not_yet = memory("m-12", "u1", "t1", "support", "Uses two keys", "user_stated", expires_at=None, review_at=LATER)
    loaded = for_u1([due, not_yet])
    assert loaded.facts == (not_yet,)
    [refused] = loaded.refused
    assert (refused.memory_id, refused.check) == ("m-11", "expired") and "review" in refused.why


def test_a_memory_without_expiry_loads_until_forgotten() -> None:
    kept = memory("m-13", "u1", "t1", "support", "Speaks Dutch", "user_stated", expires_at=None)
    assert for_u1([kept]).facts == (kept,)


def test_a_forgotten_memory_is_neither_loaded_nor_listed_as_left_out() -> None:
    tomb = replace(KEY, text="", forgotten_at="2026-09-30T00:00:00Z", forgotten_reason="asked to")
    loaded = for_u1([tomb])
    assert (loaded.facts, loaded.hypotheses, loaded.refused) == ((), (), ())


def test_several_purposes_may_serve_one_decision_and_one_given_bare_is_not_read_as_letters() -> None:
    both = load([KEY, CARD], subject="u1", tenant="t1", purposes=("support", "billing"), now=NOW)
    assert both.facts == (KEY, CARD)
    sup = memory("m-14", "u1", "t1", "sup", "x", "system_record")
    assert refusals(load([sup], subject="u1", tenant="t1", purposes="support", now=NOW)) == {"m-14": "purpose"}


def test_the_refusals_a_manifest_may_list_leave_out_other_subjects_and_tenants() -> None:
    loaded = for_u1([OTHER, OTHER_TENANT, CARD])
    assert [r.memory_id for r in loaded.left_out] == ["m-3"]


def test_a_naive_clock_is_read_as_utc() -> None:
    assert for_u1([OLD_PLAN]).refused == load(
        [OLD_PLAN], subject="u1", tenant="t1", purposes="support", now=datetime(2026, 10, 2)
    ).refused


names = st.sampled_from(["u1", "u2", "t1", "t2", "support", "billing"])


@given(st.lists(st.tuples(names, names, names, st.sampled_from(["user_stated", "system_record", "model_inferred",
                                                                  "unknown"]),
                          st.integers(-3, 3)), max_size=12))
def test_another_subjects_or_tenants_memory_never_loads_nor_shows_as_left_out(rows) -> None:
    given_memories = [
        memory(f"m-{i}", subject, tenant, purpose, f"text {i}", source, expires_at=NOW + timedelta(days=days))
        for i, (subject, tenant, purpose, source, days) in enumerate(rows)
    ]
    loaded = for_u1(given_memories)
    seen = [*loaded.facts, *loaded.hypotheses]
    assert all((m.subject, m.tenant) == ("u1", "t1") for m in seen)
    by_id = {m.memory_id: m for m in given_memories}
    assert all((by_id[r.memory_id].subject, by_id[r.memory_id].tenant) == ("u1", "t1") for r in loaded.left_out)
    # Every memory is accounted for once: loaded or refused.
    assert sorted(m.memory_id for m in seen) == sorted(set(by_id) - {r.memory_id for r in loaded.refused})

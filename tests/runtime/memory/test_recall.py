"""A decision sees what agentd remembers of its subject: in scope, for its purpose, current, fenced as data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from runtime import memory
from store.events import EvidenceRetrieved
from tests.helpers import answer, events, run, scripted_runtime, submit


def remember(store, text: str, *, subject="ann", tenant="default", purpose="workspace", source="user_stated",
             **dates) -> str:
    memory_id, _ = memory.propose(store, subject=subject, tenant=tenant, purpose=purpose, text=text, source=source,
                                  by="cli:ops", **dates)
    return memory_id


def test_a_task_is_shown_its_subjects_memories_and_nothing_of_another_subject_or_tenant(
    store, data_dir, tmp_path
) -> None:
    mine = remember(store, "Ann prefers answers in British English.")
    guess = remember(store, "Ann probably works on the billing team.", source="model_inferred",
                     expires_at=datetime.now(UTC) + timedelta(days=30))
    remember(store, "Bob keeps his notes in notes/bob.md.", subject="bob")
    remember(store, "Globex's Ann uses staging.", tenant="globex")
    elsewhere = remember(store, "Ann's support plan is pro.", purpose="support")
    rt = scripted_runtime(store, data_dir, [answer("Noted.")])
    task_id = submit(store, tmp_path, "What do you remember about how I like answers?")
    assert run(rt, task_id) == "completed"

    [retrieved] = events(store, task_id, EvidenceRetrieved)
    assert [i.cite for i in retrieved.items] == [f"memory:{mine}", f"memory:{guess}"]
    assert retrieved.items[1].text.startswith("Hypothesis, inferred by a model, unverified (model_inferred")
    # Another purpose is left out with its reason; another subject's or tenant's is not even named.
    assert [(o.source, o.kind) for o in retrieved.left_out] == [(f"memory:{elsewhere}", "memory")]
    prompt = rt.model.prompts[-1]
    assert "British English" in prompt and "billing team" in prompt
    for other in ("Bob keeps", "staging", "support plan"):
        assert other not in prompt
    assert f'<data id="memory:{mine}"' in prompt, "fenced as data under its id"


def test_a_forgotten_or_expired_memory_no_longer_loads(store, data_dir, tmp_path) -> None:
    gone = remember(store, "Ann's desk is by the window.")
    memory.forget(store, gone, "asked to", by="cli:ann")
    # Recorded last week, to last until yesterday.
    last_week = datetime.now(UTC) - timedelta(days=7)
    remember(store, "Ann is on leave this week.", expires_at=last_week + timedelta(days=6), now=last_week)
    rt = scripted_runtime(store, data_dir, [answer("Nothing remembered.")])
    task_id = submit(store, tmp_path, "Where is my desk, and am I on leave?")
    assert run(rt, task_id) == "completed"
    # Nothing is shown; the expired memory is recorded as considered and left out, with why.
    [retrieved] = events(store, task_id, EvidenceRetrieved)
    assert retrieved.items == ()
    assert [o.reason.split(" at ")[0] for o in retrieved.left_out] == ["expired"]
    for prompt in rt.model.prompts:
        assert "window" not in prompt and "on leave this week" not in prompt

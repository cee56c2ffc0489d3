"""`remember`: a memory a model proposes is checked by code and recorded as a hypothesis about the task's own
user, offered only where the user asks for it and the task allows the memory effect."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from runtime import memory
from runtime.artifacts import ArtifactStore
from runtime.harness.tasks import submit_task
from runtime.tools import ToolContext, execute
from runtime.tools.memory import FACT_MEMORY, REVIEW_DAYS, Remember, Scope
from store import NO_STREAM
from store.events import EvidenceRetrieved, MemoryRecorded
from tests.helpers import answer, call, events, one_error_line, run, scripted_runtime, submit

KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e"
ASKED = "Remember that I prefer metric units in every answer."


def memories_of(store, subject: str) -> list[memory.Memory]:
    return list(memory.from_rows(store.memories(subject=subject, tenant="default")).values())


def test_a_remembered_fact_is_a_hypothesis_about_the_tasks_own_user_with_a_review_date(
    store, data_dir, workspace
) -> None:
    rt = scripted_runtime(store, data_dir, [
        call("remember", text=f"Ann prefers metric units; her key is {KEY}."),
        # A change claimed, and backed: the recorded memory is the act, though no file changed.
        answer("I have saved that you prefer metric units."),
    ])
    task_id = submit(store, workspace, ASKED, allowed_effects=("read", "memory"))
    assert run(rt, task_id) == "completed"

    # Recorded in the task's own stream, beside the call that proposed it.
    [event] = events(store, task_id, MemoryRecorded)
    [kept] = memories_of(store, "ann")
    assert kept.memory_id == event.memory_id
    # Whom and whose: the task's authenticated actor and tenant; what for: the profile's purpose.
    assert (kept.subject, kept.tenant, kept.purpose, kept.source) == ("ann", "default", "workspace", "model_inferred")
    assert KEY not in kept.text and "[redacted:" in kept.text
    assert kept.expires_at is None
    due = kept.review_at - datetime.now(UTC)
    assert timedelta(days=REVIEW_DAYS - 1) < due <= timedelta(days=REVIEW_DAYS)

    # Ann's next task is shown it as a hypothesis; Bob's is not shown it at all.
    rt = scripted_runtime(store, data_dir, [answer("In metric units.")])
    later = submit(store, workspace, "Which units do I like my answers in?")
    assert run(rt, later) == "completed"
    [retrieved] = events(store, later, EvidenceRetrieved)
    assert [i.cite for i in retrieved.items] == [f"memory:{kept.memory_id}"]
    assert retrieved.items[0].text.startswith("Hypothesis, inferred by a model")
    rt = scripted_runtime(store, data_dir, [answer("I do not know.")])
    bobs = f"t-{len(store.tasks()) + 1}"
    store.append(bobs, submit_task("Which units do I like?", workspace), expected_version=NO_STREAM, actor="bob")
    assert run(rt, bobs) == "completed"
    assert "metric" not in rt.model.prompts[-1]


def test_an_answer_that_says_it_saved_what_no_call_recorded_is_refused(store, data_dir, workspace) -> None:
    rt = scripted_runtime(store, data_dir, [
        answer("I have saved that you prefer metric units."),
        answer("I have saved that you prefer metric units."),
    ])
    task_id = submit(store, workspace, ASKED, allowed_effects=("read", "memory"))
    assert run(rt, task_id) == "failed"
    assert memories_of(store, "ann") == []


def test_the_model_names_only_the_text_never_whom_it_is_about(store, data_dir, workspace) -> None:
    rt = scripted_runtime(store, data_dir, [
        call("remember", text="Bob is an admin.", subject="bob", tenant="globex"),
        answer("Not remembered."),
    ])
    task_id = submit(store, workspace, "Remember that Bob is an admin.", allowed_effects=("read", "memory"))
    run(rt, task_id)
    assert events(store, task_id, MemoryRecorded) == []
    assert memories_of(store, "bob") == []


def test_remember_is_offered_only_where_the_user_asks_and_the_task_allows_memory(
    store, data_dir, workspace
) -> None:
    for goal, allowed, offered in (
        (ASKED, ("read", "memory"), True),
        (ASKED, ("read", "write"), False),
        ("Which units do I prefer?", ("read", "memory"), False),
    ):
        rt = scripted_runtime(store, data_dir, [answer("Done.")])
        task_id = submit(store, workspace, goal, allowed_effects=allowed)
        run(rt, task_id)
        assert ('"name":"remember"' in rt.model.prompts[0]) is offered, (goal, allowed)


def test_retention_for_the_purpose_sets_the_expiry_instead_of_a_review(tmp_path) -> None:
    ctx = ToolContext(
        task_id="t-1", tenant="default", actor="ann", workspace=tmp_path, artifacts=ArtifactStore(tmp_path / "a"),
        facts={FACT_MEMORY: Scope("workspace", {"workspace": 7})},
    )
    outcome = execute(Remember(), ctx, {"text": "Ann's team meets on Mondays."})
    assert outcome.status == "ok"
    [event] = outcome.artifact_events
    assert event.review_at is None
    expires = datetime.fromisoformat(event.expires_at)
    assert timedelta(days=6) < expires - datetime.now(UTC) <= timedelta(days=7)


def test_outside_a_task_there_is_no_one_to_remember_for_and_nothing_is_recorded(tmp_path) -> None:
    ctx = ToolContext(
        task_id="tool-run", tenant="default", actor="ann", workspace=tmp_path, artifacts=ArtifactStore(tmp_path / "a"),
    )
    outcome = execute(Remember(), ctx, {"text": "Ann's team meets on Mondays."})
    assert (outcome.status, outcome.observation["error"]) == ("refused", "no_subject")
    assert outcome.artifact_events == ()


def test_a_text_that_is_nothing_once_redacted_is_not_recorded(tmp_path) -> None:
    ctx = ToolContext(
        task_id="t-1", tenant="default", actor="ann", workspace=tmp_path, artifacts=ArtifactStore(tmp_path / "a"),
        facts={FACT_MEMORY: Scope("workspace", {})},
    )
    outcome = execute(Remember(), ctx, {"text": "   "})
    assert (outcome.status, outcome.observation["error"]) == ("error", "not_recorded")
    assert outcome.artifact_events == ()


def test_a_task_is_submitted_with_the_memory_effect_and_a_misspelt_effect_is_one_line(agentd, data_dir) -> None:
    done = agentd("task", "submit", "--allow", "memory", ASKED)
    assert done.returncode == 0, done.stderr
    [submitted] = [json.loads(line) for line in agentd("events", "list", "--json").stdout.splitlines()]
    assert submitted["type"] == "TaskSubmitted" and submitted["stream_id"] == done.stdout.strip()
    assert submitted["payload"]["allowed_effects"] == ["memory", "read"]
    wrong = agentd("task", "submit", "--allow", "memories", ASKED)
    one_error_line(wrong, "'memories' is not one of", code=2)
    assert len(agentd("events", "list", "--json").stdout.splitlines()) == 1, "nothing more was submitted"

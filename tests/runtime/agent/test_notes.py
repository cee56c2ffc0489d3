"""Notes (policy addition `notes`, and `pinned_tail`): one short note per user message of what must survive
the session, taken once by a call of its own, shown after the stable prefix or at the end of the request,
and never left out by a policy or a compaction."""

from __future__ import annotations

import json

import anyio
import pytest

from runtime.agent import compaction, notes, policy
from runtime.agent.accounting import account
from runtime.agent.loop import run_task
from runtime.agent.proposal import Rejected
from runtime.agent.rerun import reassemble, rerun_recorded
from runtime.errors import ConfigError
from runtime.inference.scripted import ScriptedModel
from store.events import AnswerGiven, ContextCompacted, ModelCalled, NoteTaken, TaskPhaseChanged
from tests.helpers import SUMMARY, answer, call, events, make_runtime, run, run_agentd, submit, tell, user_turn

RULE = "Standing rule: every ticket you open is filed under my employee number 4417."
FACT = "The affected shard is pay-shard-7, confirmed by the payments team."


class Noting(ScriptedModel):
    """Scripted replies for the task's decisions; the note-taker keeps the message's sentence that
    names a number, and none otherwise; the summarizer writes a summary that keeps nothing specific."""

    def __init__(self, replies, **kw) -> None:
        super().__init__(replies, **kw)
        self.note_prompts: list[str] = []
        self.note_replies: list[str] = []

    def complete(self, prompt, *, schema, max_tokens, session=None, progress=None, repeat_penalty=1.0):
        if schema == notes.SCHEMA:
            self.note_prompts.append(prompt)
            message = user_turn(prompt)
            kept = next((line for line in message.splitlines() if any(c.isdigit() for c in line)
                         and not line.startswith("Message ")), "NONE")
            reply = self.note_replies.pop(0) if self.note_replies else json.dumps({"note": kept})
            self.replies.insert(0, reply)
        elif schema == compaction.SCHEMA:
            self.replies.insert(0, json.dumps(SUMMARY))
        return super().complete(prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress)


def noting(store, tmp_path, replies, **kw):
    return make_runtime(store, Noting(replies, **kw), tmp_path)


def conversation(store, rt, workspace, spec: str, said=(RULE, FACT)) -> str:
    """A conversation: the goal, then each of `said` after an answer."""
    task_id = submit(store, workspace, goal="Help me with the incident. Read notes.txt first.", conversation=True,
                     policy=spec)
    assert run(rt, task_id) == "waiting_for_user"
    for text in said:
        tell(store, task_id, text)
        assert run(rt, task_id) == "waiting_for_user"
    return task_id


def replies_for(turns: int) -> list[dict]:
    return [call("read_file", path="notes.txt"), answer("read", "notes.txt")] + [
        answer(f"noted {n}") for n in range(1, turns)
    ]


@pytest.mark.parametrize("spec, parsed", [
    ("notes", policy.Policy("auto", notes=True)),
    ("pinned_tail", policy.Policy("auto", notes=True, pinned_tail=True)),
    ("compact+notes", policy.Policy("compact", notes=True)),
    (" window:3 + pinned_tail ", policy.Policy("window", 3, notes=True, pinned_tail=True)),
    ("notes+pinned_tail", policy.Policy("auto", notes=True, pinned_tail=True)),
])
def test_notes_and_pinned_tail_compose_with_any_base_policy(spec, parsed) -> None:
    assert policy.parse(spec) == parsed
    assert policy.parse(str(parsed)) == parsed


@pytest.mark.parametrize("spec, says", [
    ("notes+notes", "names an addition twice"),
    ("auto+full", "names 2 base policies"),
    ("auto+", "unknown context policy"),
    ("notes+bogus", "unknown context policy"),
    ("window+notes", "needs a number"),
])
def test_a_bad_composition_is_one_clear_config_error(spec, says) -> None:
    with pytest.raises(ConfigError, match=says):
        policy.parse(spec)


@pytest.mark.parametrize("reply, note", [
    ('{"note": "NONE"}', ""),
    ('{"note": "none worth keeping"}', ""),
    ('{"note": "  "}', ""),
    ('{"note": "Employee number 4417 for tickets."}', "Employee number 4417 for tickets."),
])
def test_a_note_reply_is_the_note_or_none(reply, note) -> None:
    assert notes.parse(reply) == note


@pytest.mark.parametrize("reply", ["no json", '["a"]', '{"text": "x"}', '{"note": 3}'])
def test_a_note_reply_that_is_not_the_object_asked_for_is_refused(reply) -> None:
    with pytest.raises(Rejected):
        notes.parse(reply)


def test_each_user_message_is_noted_once_and_the_notes_follow_the_stable_prefix(
    store, release_workspace, tmp_path, data_dir
) -> None:
    rt = noting(store, tmp_path, replies_for(3))
    task_id = conversation(store, rt, release_workspace, "notes")
    taken = events(store, task_id, NoteTaken)
    # One per message, each naming the message it came from; the goal states nothing to keep.
    assert [(e.message, e.note) for e in taken] == [("request", ""), ("request:2", RULE), ("request:3", FACT)]
    assert all(e.prompt_tokens > 0 and e.prompt_sha256 for e in taken)
    # The note-taker saw the one message, and the user's own words, never the task's history.
    assert RULE in user_turn(rt.model.note_prompts[1]) and "notes.txt" not in user_turn(rt.model.note_prompts[1])
    last = events(store, task_id, ModelCalled)[-1].manifest
    labels = [i.block for i in last.items]
    assert labels.index("notes") < labels.index("request")
    [item] = [i for i in last.items if i.block == "notes"]
    assert (item.kind, item.trust) == ("memory", "untrusted")
    prompt = user_turn(rt.model.prompts[-1])
    assert f"- message 2: {RULE}" in prompt and f"- message 3: {FACT}" in prompt
    # A new note rewrites the head of the history: the break is recorded where it happens.
    assert events(store, task_id, ModelCalled)[-1].prefix_break == "notes: its content changed"
    spent = account(store.read_stream(task_id))
    assert spent.notes == 3 and spent.note_prompt_tokens == sum(e.prompt_tokens for e in taken)
    shown = run_agentd("--data-dir", str(data_dir), "task", "show", task_id, "--buckets")
    assert f"on 3 note-taker call(s): {spent.note_prompt_tokens} read" in shown.stdout, shown.stderr


def test_pinned_tail_puts_the_notes_just_before_the_decision_and_breaks_no_prefix(
    store, release_workspace, tmp_path
) -> None:
    rt = noting(store, tmp_path, replies_for(3))
    task_id = conversation(store, rt, release_workspace, "pinned_tail")
    calls = events(store, task_id, ModelCalled)
    labels = [i.block for i in calls[-1].manifest.items]
    assert labels[-2:] == ["pinned", "decision"] and "notes" not in labels
    prompt = user_turn(rt.model.prompts[-1])
    assert prompt.index(FACT) < prompt.index('<data id="pinned"') < prompt.index("<decision>")
    assert f"- message 2: {RULE}" in prompt and f"- message 3: {FACT}" in prompt
    assert [c.prefix_break for c in calls] == [None] * len(calls)


def test_notes_survive_every_compaction_and_are_never_left_out(store, tmp_path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(1, 17):
        (ws / f"n{i:02}.txt").write_text(" ".join(f"note{i}-{j}" for j in range(120)) + "\n")
    replies = [call("read_file", path=f"n{i:02}.txt") for i in range(1, 17)] + [answer("read them all")]
    rt = noting(store, tmp_path, replies, n_ctx=6000)
    task_id = submit(store, ws, goal=f"Read every note. {RULE}", policy="compact+notes")
    assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
    assert events(store, task_id, ContextCompacted), "nothing was compacted, so the test does not reach the trigger"
    [taken] = events(store, task_id, NoteTaken)
    assert "4417" in taken.note
    # Every request after the note shows it, before and after each compaction; the summary never replaced it.
    assert all("- message 1: " in user_turn(p) and "4417" in user_turn(p) for p in rt.model.prompts
               if '"note"' not in p and "Write the summary now." not in p)
    for c in events(store, task_id, ModelCalled):
        assert not any(x.source == "notes" for x in c.manifest.left_out)
    assert rerun_recorded(rt, task_id).difference is None


def test_a_note_reply_that_cannot_be_read_is_recorded_with_the_reason_and_the_task_goes_on(
    store, release_workspace, tmp_path
) -> None:
    rt = noting(store, tmp_path, replies_for(2))
    rt.model.note_replies = ['{"text": "4417"}']
    task_id = conversation(store, rt, release_workspace, "notes", said=(RULE,))
    first, second = events(store, task_id, NoteTaken)
    assert first.note == "" and "must be one JSON object" in first.error and first.output == '{"text": "4417"}'
    assert second.note == RULE and second.error == ""
    assert len(events(store, task_id, AnswerGiven)) == 2
    assert rerun_recorded(rt, task_id).difference is None


def test_a_message_is_noted_exactly_once_across_a_restart(store, release_workspace, tmp_path) -> None:
    rt = noting(store, tmp_path, [call("read_file", path="notes.txt"), answer("read", "notes.txt")])
    task_id = submit(store, release_workspace, goal=f"Read notes.txt. {RULE}", policy="notes")
    # Stopped after the first decision, as a crash would: the next run takes no note again.
    assert run(rt, task_id, max_decisions=1) == "running"
    assert run(rt, task_id) == "completed"
    assert [e.message for e in events(store, task_id, NoteTaken)] == ["request"]
    assert len(rt.model.note_prompts) == 1


def test_a_rerun_finds_a_forged_note(store, release_workspace, tmp_path) -> None:
    rt = noting(store, tmp_path, replies_for(2))
    task_id = conversation(store, rt, release_workspace, "notes", said=(RULE,))
    assert rerun_recorded(rt, task_id).difference is None
    records = store.read_stream(task_id)
    i = next(n for n, r in enumerate(records) if isinstance(r.event, NoteTaken) and r.event.note)
    records[i] = records[i]._replace(event=records[i].event.model_copy(update={"note": "employee number 1234"}))
    store.read_stream = lambda stream_id, until=None: records  # the log as a forger left it
    report = rerun_recorded(rt, task_id)
    assert report.difference is not None and "reads differently today" in report.difference.what


def test_a_reassembly_shows_recorded_notes_only_under_a_policy_that_shows_notes(
    store, release_workspace, tmp_path
) -> None:
    rt = noting(store, tmp_path, replies_for(3))
    task_id = conversation(store, rt, release_workspace, "notes")
    calls = [c for c in events(store, task_id, ModelCalled) if c.attempt == 1]
    same = reassemble(rt, task_id, "notes")
    assert [c.tokens for c in same] == [c.prompt_tokens for c in calls]
    without = reassemble(rt, task_id, "auto")
    # The last request loses exactly the notes block: nothing else a policy change does not change.
    assert without[-1].tokens < same[-1].tokens and [c.tokens for c in without[:1]] == [calls[0].prompt_tokens]


@pytest.mark.parametrize("spec", ["auto+notes", "user_verbatim:1+pinned_tail", "window:2+notes"])
def test_forty_user_turns_with_notes(store, release_workspace, tmp_path, spec) -> None:
    replies = [call("read_file", path="notes.txt"), answer("read", "notes.txt")] + [
        answer(f"noted {n}") for n in range(1, 40)
    ]
    rt = noting(store, tmp_path, replies, n_ctx=6000)
    said = [f"message {n}: remember the code Z{n}" for n in range(1, 40)]
    task_id = conversation(store, rt, release_workspace, spec, said=said)
    assert len(events(store, task_id, NoteTaken)) == 40 and len(events(store, task_id, AnswerGiven)) == 40
    last = user_turn(rt.model.prompts[-1])
    assert all(f"- message {n + 1}: message {n}: remember the code Z{n}" in last for n in range(1, 40))
    assert events(store, task_id, TaskPhaseChanged)[-1].phase == "waiting_for_user"

"""Compaction (policy `compact`): older steps replaced by a summary with fixed sections that a model call
of its own writes; the artifact trail and the user's words never left to the summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import anyio
import pytest

from runtime.agent import compaction, policy
from runtime.agent.accounting import account
from runtime.agent.blocks import Block
from runtime.agent.loop import run_task
from runtime.agent.proposal import Rejected
from runtime.agent.rerun import reassemble, rerun_recorded
from runtime.errors import ConfigError
from runtime.inference.scripted import ScriptedModel
from store import EventStore
from store.events import (
    CompactionFailed,
    ContextCompacted,
    ContextTrimmed,
    ModelCalled,
    TaskPhaseChanged,
)
from tests.helpers import REPO, SUMMARY, answer, call, events, make_runtime, submit, tell, user_turn

RULE = "Never write to a file whose name starts with x."


class Summarizing(ScriptedModel):
    """Scripted replies for the task's decisions, and its own for each summarizer call."""

    def __init__(self, replies, summaries, **kw) -> None:
        super().__init__(replies, **kw)
        self.summaries = [s if isinstance(s, str) else json.dumps(s) for s in summaries]
        self.summary_prompts: list[str] = []

    def complete(self, prompt, *, schema, max_tokens, session=None, progress=None, repeat_penalty=1.0):
        if schema == compaction.SCHEMA:
            self.summary_prompts.append(prompt)
            self.replies.insert(0, self.summaries.pop(0))
        return super().complete(prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress)


def long_task(store, tmp_path, summaries, spec: str = "compact", notes: int = 16):
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(1, notes + 1):
        (ws / f"n{i:02}.txt").write_text(" ".join(f"note{i}-{j}" for j in range(120)) + "\n")
    replies = [call("read_file", path=f"n{i:02}.txt") for i in range(1, notes + 1)] + [answer("read them all")]
    rt = make_runtime(store, Summarizing(replies, summaries, n_ctx=6000), tmp_path)
    task_id = submit(store, ws, goal=f"Read every note. {RULE}", policy=spec)
    return rt, task_id


def block(label: str) -> Block:
    return Block(label, "instruction", "agentd", "trusted", label)


def test_a_plan_replaces_the_steps_not_yet_summarized_but_the_latest_two() -> None:
    entries = [block("request")] + [block(f"{k}:c{i}") for i in range(1, 6) for k in ("step", "result")]
    seqs = {b.label: n for n, b in enumerate(entries, start=10)}
    p = compaction.plan(entries, seqs, set())
    assert p.through_call == "c3" and [b.label for b in p.blocks][-1] == "result:c3"
    assert (p.first_seq, p.last_seq) == (seqs["step:c1"], seqs["result:c3"])
    # After a compaction through c3, only c4 and c5 are fresh: both kept whole, nothing to replace.
    assert compaction.plan(entries, seqs, {"c1", "c2", "c3"}) is None


@pytest.mark.parametrize("reply, says", [
    ("no json", "not JSON"),
    ("[1, 2]", "one JSON object"),
    (json.dumps({**SUMMARY, "next_steps": "  "}), "'next_steps' is missing or empty"),
    (json.dumps({k: v for k, v in SUMMARY.items() if k != "decisions"}), "'decisions' is missing"),
])
def test_a_summary_that_is_not_json_or_leaves_a_section_empty_is_refused_with_the_reason(reply, says) -> None:
    with pytest.raises(Rejected, match=says):
        compaction.parse(reply)


def test_compact_takes_no_number() -> None:
    assert policy.parse("compact") == policy.Policy("compact")
    with pytest.raises(ConfigError, match="takes no number"):
        policy.parse("compact:3")


def test_a_long_task_under_compact_summarizes_its_older_steps_and_finishes(store, tmp_path) -> None:
    rt, task_id = long_task(store, tmp_path, [SUMMARY] * 6)
    assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
    compactions = events(store, task_id, ContextCompacted)
    assert compactions, "nothing was compacted, so the test does not reach the trigger"
    first = compactions[0]
    assert first.sections == SUMMARY and first.tokens_after < first.tokens_before
    assert first.tokens_before > compaction.TRIGGER * first.budget and first.prompt_tokens > 0
    calls = events(store, task_id, ModelCalled)
    assert len(calls) == 17 and not events(store, task_id, TaskPhaseChanged)[-1].reason.startswith("failed")
    after = next(c for c in calls if c.call_index == first.call_index)
    # The summary stands where the replaced steps were; they are listed as left out, and are in the log.
    items = [i.block for i in after.manifest.items]
    assert "summary" in items and "result:c1" not in items
    assert any(x.source == "result:c1" and x.reason == "compact: in the summary" for x in after.manifest.left_out)
    prompt = user_turn(rt.artifacts.get(after.manifest.prompt_ref).decode())
    # The artifact trail is rendered from the log, not written by the summarizer; the user's rule is theirs.
    assert "Files read: n01.txt, n02.txt" in prompt and "Next steps: read the remaining notes" in prompt
    assert f"Read every note. {RULE}" in prompt and '<data id="summary" source="compaction"' in prompt
    # The prefix breaks where a compaction (or a cut) rewrote the history, and nowhere else.
    rewrites = {e.call_index for e in compactions} | {e.call_index for e in events(store, task_id, ContextTrimmed)}
    assert {c.call_index for c in calls if c.prefix_break} <= rewrites
    # The summarizer saw the summary before it: anchored, not started afresh.
    assert len(compactions) == 1 or "Next steps: read the remaining notes" in user_turn(rt.model.summary_prompts[1])

    spent = account(store.read_stream(task_id))
    assert spent.compactions == len(compactions)
    assert spent.compaction_prompt_tokens == sum(e.prompt_tokens for e in compactions) > 0

    report = rerun_recorded(rt, task_id)
    assert report.difference is None, report.difference
    same = reassemble(rt, task_id, "compact")
    assert [c.tokens for c in same] == [c.prompt_tokens for c in calls if c.attempt == 1]


def test_a_recorded_summary_that_today_reads_otherwise_is_a_divergence(store, tmp_path) -> None:
    rt, task_id = long_task(store, tmp_path, [SUMMARY] * 6)
    anyio.run(lambda: run_task(rt, task_id))
    records = store.read_stream(task_id)
    i = next(n for n, r in enumerate(records) if isinstance(r.event, ContextCompacted))
    forged = records[i].event.model_copy(update={"sections": {**SUMMARY, "decisions": "something else"}})
    records[i] = records[i]._replace(event=forged)
    store.read_stream = lambda stream_id, until=None: records  # the log as a forger left it
    report = rerun_recorded(rt, task_id)
    assert report.difference is not None and "reads into other sections" in report.difference.what


def test_a_summarizer_that_fails_twice_is_recorded_and_the_task_goes_on_cut(store, tmp_path) -> None:
    bad = ["not json", {**SUMMARY, "decisions": ""}] * 4
    rt, task_id = long_task(store, tmp_path, bad)
    assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
    failed = events(store, task_id, CompactionFailed)
    assert failed and "'decisions' is missing or empty" in failed[0].error
    assert not events(store, task_id, ContextCompacted)
    # Not tried again at every step: each failure costs two calls, then a pause.
    assert len(rt.model.summary_prompts) == 2 * len(failed)
    # Each failure with the one before it: one pair fewer than failures.
    assert all(
        b.call_index - a.call_index >= compaction.RETRY_AFTER for a, b in zip(failed, failed[1:], strict=False)
    )
    # The retry said what was wrong with the first reply.
    assert "not JSON" in user_turn(rt.model.summary_prompts[1])
    # The task went on with its history cut as `auto` cuts it: never a silently truncated transcript.
    assert events(store, task_id, ContextTrimmed)
    assert rerun_recorded(rt, task_id).difference is None


class Crash(BaseException):
    """The process dies here: nothing after it runs, nothing is recorded for it."""


class CrashingOnce(Summarizing):
    def complete(self, prompt, *, schema, max_tokens, session=None, progress=None, repeat_penalty=1.0):
        if schema == compaction.SCHEMA and not self.summary_prompts:
            self.summary_prompts.append(prompt)
            raise Crash
        return super().complete(prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress)


def test_a_crash_during_the_summarizer_call_resumes_with_the_compaction_taken_once(store, tmp_path) -> None:
    rt, task_id = long_task(store, tmp_path, [SUMMARY] * 6)
    rt.model.__class__ = CrashingOnce
    with pytest.raises(Crash):
        anyio.run(lambda: run_task(rt, task_id))
    crashed_at = events(store, task_id, ModelCalled)[-1].call_index + 1
    assert not events(store, task_id, ContextCompacted)
    # The next start takes the step again from the log: one summarizer call, one compaction, once.
    resumes_with_one_compaction_at(store, rt, task_id, crashed_at)


def resumes_with_one_compaction_at(store, rt, task_id: str, crashed_at: int) -> None:
    assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
    compactions = events(store, task_id, ContextCompacted)
    assert compactions[0].call_index == crashed_at
    assert len({e.call_index for e in compactions}) == len(compactions)
    assert [c.call_index for c in events(store, task_id, ModelCalled)] == list(range(1, 18))
    assert rerun_recorded(rt, task_id).difference is None


HANGING_CHILD = """
import sys, time
from pathlib import Path

import anyio

from runtime.agent.loop import run_task
from store import EventStore
from tests.helpers import SUMMARY
from tests.runtime.agent.test_compaction import Summarizing, compaction, long_task

url, tmp, marker = sys.argv[1:]


class HangsInTheSummarizer(Summarizing):
    def complete(self, prompt, *, schema, max_tokens, session=None, progress=None, repeat_penalty=1.0):
        if schema == compaction.SCHEMA:
            Path(marker).write_text("summarizing")
            time.sleep(600)
        return super().complete(prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress)


with EventStore(url) as store:
    rt, task_id = long_task(store, Path(tmp), [SUMMARY])
    rt.model.__class__ = HangsInTheSummarizer
    anyio.run(lambda: run_task(rt, task_id))
"""


def test_kill_9_during_the_summarizer_call_resumes_with_the_compaction_taken_once(db_url, tmp_path) -> None:
    """A real process killed with SIGKILL while its summarizer call runs: the next start takes the step
    again from the log, and the compaction is recorded once, at that step."""
    marker = tmp_path / "summarizing"
    child = subprocess.Popen([sys.executable, "-c", HANGING_CHILD, db_url, str(tmp_path), str(marker)], cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "the child never reached the summarizer"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()

    with EventStore(db_url) as store:
        [task_id] = [t.task_id for t in store.tasks()]
        assert not events(store, task_id, ContextCompacted)
        crashed_at = events(store, task_id, ModelCalled)[-1].call_index + 1
        replies = [call("read_file", path=f"n{i:02}.txt") for i in range(1, 17)] + [answer("read them all")]
        rt = make_runtime(store, Summarizing(replies[crashed_at - 1:], [SUMMARY] * 6, n_ctx=6000), tmp_path)
        resumes_with_one_compaction_at(store, rt, task_id, crashed_at)


def test_forty_user_turns_under_compact(store, tmp_path) -> None:
    """The conversation of tests/runtime/agent/test_conversation.py, which outgrows a 6,000-token window under
    `full`, under `compact`: it summarizes and goes on, and every message of the user's stays verbatim."""
    ws = tmp_path / "ws"
    ws.mkdir()
    replies = []
    for n in range(40):
        (ws / f"part{n}.txt").write_text(" ".join(["word"] * 150))
        replies += [call("read_file", path=f"part{n}.txt"), answer(f"answer {n}", f"part{n}.txt")]
    rt = make_runtime(store, Summarizing(replies, [SUMMARY] * 40, n_ctx=6000), tmp_path)
    task_id = submit(store, ws, conversation=True, policy="compact", max_tokens=10**8)
    phases = [anyio.run(lambda: run_task(rt, task_id))]
    for n in range(1, 40):
        tell(store, task_id, f"message {n}: remember the code Z{n}")
        phases.append(anyio.run(lambda: run_task(rt, task_id)))
    assert phases == ["waiting_for_user"] * 40
    assert events(store, task_id, ContextCompacted), "nothing was compacted, so the test does not reach the window"
    last = user_turn(rt.model.prompts[-1])
    assert all(f"message {n}: remember the code Z{n}" in last for n in range(1, 40))
    assert rerun_recorded(rt, task_id).difference is None

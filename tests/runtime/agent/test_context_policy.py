"""Context policies: exactly what each keeps and leaves out of a task's history, and the default that
keeps a long task going past the window instead of failing it."""

from __future__ import annotations

import anyio
import pytest

from runtime.agent import policy
from runtime.agent.loop import run_task
from runtime.agent.rerun import reassemble, rerun_recorded
from runtime.agent.view import TaskView
from runtime.errors import ConfigError
from runtime.inference.scripted import ScriptedModel
from store.events import (
    AnswerGiven,
    ContextTrimmed,
    ModelCalled,
    Recorded,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
    UserSaid,
)
from tests.helpers import answer, call, events, make_runtime, submit


def history(results: int, size: int = 40) -> TaskView:
    """A task that read `results` files, file i holding `size` words."""
    evs = [TaskSubmitted(goal="Summarise the notes.", workspace="/w")]
    for i in range(1, results + 1):
        evs += [
            ToolCallProposed(call_id=f"c{i}", tool="read_file", arguments={"path": f"n{i}.txt"}),
            ToolCallExecuted(call_id=f"c{i}", tool="read_file", status="ok", artifact_ref=f"artifact://sha256/{i:064x}",
                             observation={"path": f"n{i}.txt", "content": "\n".join(["word"] * size)}),
        ]
    return TaskView.of(
        Recorded(n, "t-1", n, "2026-12-02T00:00:00Z", "ann", None, None, e) for n, e in enumerate(evs, 1)
    )


def words(text: str) -> int:
    return len(text.split())


def size(history) -> int:
    return sum(words(b.render()) for b in history)


def shown(spec: str, view: TaskView, budget: int = 10**9, cut: policy.Cut = policy.Cut()) -> policy.Shown:
    t = view.transcript
    return policy.apply(policy.parse(spec), t.entries, t.results, measure=size, budget=budget, count=words, cut=cut)


def labels(s: policy.Shown) -> list[str]:
    return [b.label for b in s.entries]


@pytest.mark.parametrize("spec, parsed", [
    ("full", policy.Policy("full")), ("auto", policy.Policy("auto")), (" window:3 ", policy.Policy("window", 3)),
    ("elide_tool_results:0", policy.Policy("elide_tool_results", 0)),
    ("user_verbatim:2", policy.Policy("user_verbatim", 2)),
])
def test_policy_names_parse_with_their_number(spec, parsed) -> None:
    assert policy.parse(spec) == parsed and policy.parse(str(parsed)) == parsed


@pytest.mark.parametrize("spec, says", [
    ("everything", "unknown context policy 'everything'"), ("window", "needs a number"), ("window:0", "at least one"),
    ("full:3", "takes no number"), ("user_verbatim:0", "at least the latest message"),
    ("user_verbatim", "needs a number"), ("window:-1", "unknown context policy"), ("", "unknown context policy"),
])
def test_a_bad_policy_is_one_clear_error(spec, says) -> None:
    with pytest.raises(ConfigError, match=says):
        policy.parse(spec)


def test_user_verbatim_keeps_every_user_message_and_the_steps_of_the_last_k() -> None:
    view = history(2)
    more = [
        AnswerGiven(answer="Two notes.", sources=()), UserSaid(text="And the third?"),
        ToolCallProposed(call_id="c3", tool="read_file", arguments={"path": "n3.txt"}),
        ToolCallExecuted(call_id="c3", tool="read_file", status="ok", observation={"path": "n3.txt", "content": "w"}),
        AnswerGiven(answer="One more.", sources=()), UserSaid(text="Thanks. Anything else?"),
    ]
    n = len(view.records)
    view.extend(
        Recorded(n + i, "t-1", n + i, "2026-12-02T00:00:00Z", "ann", None, None, e) for i, e in enumerate(more, 1)
    )
    assert labels(shown("user_verbatim:2", view)) == [
        "request", "answer:1", "request:2", "step:c3", "result:c3", "answer:2", "request:3",
    ]
    s = shown("user_verbatim:1", view)
    assert labels(s) == ["request", "answer:1", "request:2", "answer:2", "request:3"]
    assert {x.source for x in s.left_out} == {f"{k}:c{i}" for k in ("step", "result") for i in (1, 2, 3)}
    assert all(x.reason == "user_verbatim:1: an older step" for x in s.left_out)
    assert s.unread == {"n1.txt", "n2.txt", "n3.txt"}
    # With fewer messages than K, nothing is dropped.
    assert shown("user_verbatim:5", view).left_out == ()


def test_full_shows_the_whole_history() -> None:
    view = history(3)
    s = shown("full", view)
    assert s.entries == tuple(view.transcript.entries) and s.left_out == ()


def test_a_window_keeps_the_request_and_the_last_k_steps_and_names_what_it_dropped() -> None:
    s = shown("window:2", history(4))
    assert labels(s) == ["request", "step:c3", "result:c3", "step:c4", "result:c4"]
    assert [(x.source, x.kind) for x in s.left_out] == [
        ("step:c1", "instruction"), ("result:c1", "observation"),
        ("step:c2", "instruction"), ("result:c2", "observation"),
    ]
    assert all(x.reason == "window:2: an older step" and x.tokens > 0 for x in s.left_out)
    assert s.dropped == {"step:c1", "result:c1", "step:c2", "result:c2"} and s.unread == {"n1.txt", "n2.txt"}


def test_eliding_keeps_every_step_and_points_to_older_results_under_their_own_label() -> None:
    view = history(3)
    s = shown("elide_tool_results:1", view)
    assert labels(s) == labels(shown("full", view))
    pointer = s.entries[2]
    assert pointer.label == "result:c1" and pointer.version == "elided"
    assert f"read it again with read_artifact(artifact://sha256/{1:064x})" in pointer.text
    assert "word" not in pointer.render() and "word" in s.entries[-1].render()
    assert [x.source for x in s.left_out] == ["result:c1", "result:c2"] and s.dropped == frozenset()
    assert s.unread == {"n1.txt", "n2.txt"}


def test_auto_changes_nothing_while_the_history_fits() -> None:
    view = history(5)
    assert shown("auto", view) == shown("full", view)


def test_auto_cuts_as_few_results_as_bring_the_request_under_the_low_water_mark() -> None:
    view = history(30, size=100)
    full = size(view.transcript.entries)
    s = shown("auto", view, budget=full - 1)
    elided = [b.label for b in s.entries if b.version == "elided"]
    assert size(s.entries) <= int((full - 1) * policy.LOW_WATER)
    # One fewer elided result would not have brought it under the mark.
    fewer = shown("auto", view, budget=full - 1, cut=policy.Cut(len(elided) - 1, 0))
    assert size(fewer.entries) > int((full - 1) * policy.LOW_WATER)
    assert elided == [f"result:c{i}" for i in range(1, len(elided) + 1)] and s.cut == policy.Cut(len(elided), 0)
    assert s.new_cut_from == full
    assert all(x.reason == "auto: the whole history no longer fits the window: elided" for x in s.left_out)


def test_auto_drops_older_steps_when_eliding_every_result_but_the_last_two_is_not_enough() -> None:
    view = history(30, size=100)
    s = shown("auto", view, budget=900)
    assert s.cut.elided == 28 and s.cut.dropped > 0 and size(s.entries) <= int(900 * policy.LOW_WATER)
    steps = [b.label for b in s.entries if b.label.startswith("step:")]
    assert steps == [f"step:c{i}" for i in range(s.cut.dropped + 1, 31)]
    assert labels(s)[0] == "request" and [b.version for b in s.entries if b.label in ("result:c29", "result:c30")] == [
        None, None
    ]
    assert {"step:c1", "result:c1"} <= s.dropped


def test_a_recorded_cut_is_kept_while_it_fits_so_the_prefix_breaks_once_per_cut() -> None:
    budget = 2600
    cut, cuts, new = policy.Cut(), [], 0
    for n in range(20, 40):
        s = shown("auto", history(n, size=100), budget=budget, cut=cut)
        assert size(s.entries) <= budget
        new += s.new_cut_from is not None
        cut = s.cut
        cuts.append(cut)
    assert cuts == sorted(cuts) and new < len(set(cuts)) + 1 and new <= 4, cuts


def test_the_same_cut_shows_the_same_blocks_as_the_history_grows() -> None:
    cut = policy.Cut(5, 2)
    earlier = shown("auto", history(12), budget=1, cut=cut)
    later = shown("auto", history(13), budget=10**9, cut=cut)
    assert later.entries[: len(earlier.entries) - 2] == earlier.entries[: len(earlier.entries) - 2]


# -- in the loop -----------------------------------------------------------------------------------


def long_task(store, tmp_path, spec: str, notes: int = 16):
    ws = tmp_path / f"ws-{spec.replace(':', '-')}"
    ws.mkdir()
    for i in range(1, notes + 1):
        (ws / f"n{i:03}.txt").write_text(" ".join(f"note{i}-{j}" for j in range(120)) + "\n")
    replies = [call("read_file", path=f"n{i:03}.txt") for i in range(1, notes + 1)] + [answer("read them all")]
    rt = make_runtime(store, ScriptedModel(replies, n_ctx=6000), tmp_path)
    task_id = submit(store, ws, goal="Read every note.", policy=spec, max_steps=notes + 5, max_tokens=10**9)
    return rt, task_id


def test_a_task_of_150_decisions_runs_past_the_window_under_the_default_policy(store, tmp_path) -> None:
    rt, task_id = long_task(store, tmp_path, "auto", notes=149)
    assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
    calls = events(store, task_id, ModelCalled)
    assert [c.call_index for c in calls] == list(range(1, 151))
    # Far past the window (149 results of about 500 tokens in a 6,000-token one), every request fit.
    assert sum(c.manifest.total_tokens for c in calls) > 20 * 6000
    assert max(c.prompt_tokens for c in calls) <= calls[-1].manifest.budget
    trims = events(store, task_id, ContextTrimmed)
    assert len(trims) >= 10
    # Cut in a few places, each a recorded rewrite of the prefix, not one at every call.
    assert [c.call_index for c in calls if c.prefix_break] == [t.call_index for t in trims]
    assert len(trims) < len(calls) / 3


def test_a_long_task_fails_at_the_window_under_full_and_finishes_under_the_default(store, tmp_path) -> None:
    rt, task_id = long_task(store, tmp_path, "full")
    assert anyio.run(lambda: run_task(rt, task_id)) == "failed"
    assert "the budget is" in events(store, task_id, TaskPhaseChanged)[-1].reason

    rt, task_id = long_task(store, tmp_path, "auto")
    assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
    calls = events(store, task_id, ModelCalled)
    assert len(calls) == 17 and max(c.prompt_tokens for c in calls) <= calls[-1].manifest.budget
    cut = [c for c in calls if any(x.reason.startswith("auto:") for x in c.manifest.left_out)]
    assert cut, "the default never cut anything, so the test does not reach the window"
    trims = events(store, task_id, ContextTrimmed)
    assert trims and trims[0].call_index == cut[0].call_index and trims[0].tokens_before > trims[0].budget
    # The prefix breaks at the calls that made a new cut, and only there.
    assert [c.call_index for c in calls if c.prefix_break] == [t.call_index for t in trims]
    # Each break names the block where the cached prefix ends and why: the cut's own reason.
    assert all(c.prefix_break.split(": ", 1)[1].startswith("auto: the whole history no longer fits")
               for c in calls if c.prefix_break)
    assert len(trims) < len(cut)
    # A re-run on the recorded outputs rebuilds every cut request exactly.
    report = rerun_recorded(rt, task_id)
    assert report.calls == 17 and report.difference is None, report.difference


def test_a_recorded_task_reassembled_under_another_policy_shows_what_each_request_would_hold(store, tmp_path) -> None:
    rt, task_id = long_task(store, tmp_path, "auto")
    assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
    recorded = {c.call_index: c.prompt_tokens for c in events(store, task_id, ModelCalled)}

    same = reassemble(rt, task_id, "auto")
    assert [(c.call_index, c.tokens) for c in same] == sorted(recorded.items())
    assert [c.call_index for c in same if c.note.startswith("cuts:")] == [
        t.call_index for t in events(store, task_id, ContextTrimmed)
    ]

    full = reassemble(rt, task_id, "full")
    over = [c.call_index for c in full if c.tokens is None]
    assert over and over[0] == 8 and all(c.left_out == 0 for c in full)
    assert [c.tokens for c in full[:7]] == [recorded[i] for i in range(1, 8)]

    window = reassemble(rt, task_id, "window:2")
    assert all(c.left_out == 2 * max(c.call_index - 3, 0) for c in window)
    # Two steps at most: every request fits, and none holds more than the whole history did while it fit.
    assert all(c.tokens is not None for c in window)
    assert all(w.tokens <= f.tokens for w, f in zip(window, full, strict=True) if f.tokens is not None)


def test_the_accounting_of_a_cut_task_shows_what_each_call_left_out(store, tmp_path) -> None:
    from runtime.agent.accounting import account

    rt, task_id = long_task(store, tmp_path, "auto")
    assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
    a = account(store.read_stream(task_id))
    calls = events(store, task_id, ModelCalled)
    assert [c.left_out > 0 for c in a.calls] == [any(x.reason.startswith("auto:") for x in c.manifest.left_out)
                                                  for c in calls]
    assert a.calls[7].left_out > 0 and a.calls[6].left_out == 0
    assert a.billed == sum(c.prompt_tokens for c in calls) and a.evaluated <= a.billed
    assert all(c.tool_results > 0 for c in a.calls[1:])


def test_the_accounting_counts_a_call_whose_endpoint_did_not_report_evaluated_tokens() -> None:
    from runtime.agent.accounting import account

    evs = [TaskSubmitted(goal="x", workspace="/w"),
           ModelCalled(call_index=1, model="m", prompt_tokens=900, completion_tokens=10, cached_tokens=600),
           ModelCalled(call_index=2, model="m", prompt_tokens=950, completion_tokens=10)]
    a = account([Recorded(n, "t-1", n, "2026-12-02T00:00:00Z", "ann", None, None, e) for n, e in enumerate(evs, 1)])
    assert (a.billed, a.evaluated) == (1850, 300 + 950)

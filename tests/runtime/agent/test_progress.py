"""Progress of a running decision: what the model reports while it evaluates and generates, and who shows it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from runtime.agent.progress import Board, Decided, Progress, Tally
from runtime.inference.http import HttpModel
from runtime.inference.model import Message, Throttled
from runtime.inference.model_file import smoke_model_path
from tests.helpers.prompt import SCHEMA, rules


def figures(completion) -> tuple:
    s = completion.stats
    return (completion.text, completion.finish_reason, s.prompt_tokens, s.cached_tokens, s.evaluated_tokens,
            s.completion_tokens)


def four_calls(model, watched: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple], list[list[tuple]]]:
    """From an empty context: a cold prompt of several batches, another question on the same system
    prompt (the context diverges midway), one that extends that, and the same again.

    Watched, each call's log holds its progress reports and, as ("eval", n), each llama.cpp evaluation.
    """
    model._llama.reset()
    log: list[tuple] = []
    evaluate = model._llama.eval
    monkeypatch.setattr(model._llama, "eval", lambda tokens: (log.append(("eval", len(tokens))), evaluate(tokens)))
    system = Message("system", rules("parcel", 60) + '\nAnswer with a JSON object like {"action": "a", "n": 1}.')
    calls = []
    logs: list[list[tuple]] = []

    def complete(messages: list[Message], **kw):
        log.clear()
        progress = (lambda *r: log.append(r)) if watched else None
        calls.append(model.complete(model.render(messages), session="progress", progress=progress, **kw))
        logs.append(list(log))
        return calls[-1]

    complete([system, Message("user", "Which rule covers request 17?")], schema=SCHEMA, max_tokens=48)
    question = [system, Message("user", "Which rule covers request 41? Choose an action.")]
    second = complete(question, schema=None, max_tokens=12)
    longer = [*question, Message("assistant", second.text), Message("user", "And request 40?")]
    complete(longer, schema=SCHEMA, max_tokens=48)
    complete(longer, schema=SCHEMA, max_tokens=48)
    monkeypatch.undo()
    return [figures(c) for c in calls], logs


@pytest.mark.slow
def test_a_watched_prompt_gives_the_same_completion_and_token_figures_as_an_unwatched_one(
    model, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain, _ = four_calls(model, False, monkeypatch)
    watched, logs = four_calls(model, True, monkeypatch)
    assert watched == plain
    n_batch = model._llama.n_batch
    (_, _, cold, _, _, _), (_, _, _, diverged, _, _), (_, _, _, extended, _, _), (_, _, _, _, again, _) = plain
    assert plain[0][4] > 2 * n_batch, "the cold prompt should take several batches"
    assert 0 < diverged < cold - 5 and extended > plain[1][2] - 2 and again <= 1, "the calls should reuse as planned"

    for (_, _, prompt, cached, evaluated, generated), log in zip(watched, logs, strict=True):
        evaluating = [r for r in log if r[0] == "evaluating"]
        generating = [r for r in log if r[0] == "generating"]
        before_first_token = log[: log.index(generating[0])]
        # The prompt was evaluated exactly once, by the reported batches: generate() evaluated none of it again.
        assert sum(r[1] for r in before_first_token if r[0] == "eval") == evaluated
        # From what was cached to the whole prompt, a report per batch.
        assert evaluating[0] == ("evaluating", cached, prompt) and evaluating[-1] == ("evaluating", prompt, prompt)
        assert [d for _, d, _ in evaluating] == sorted({d for _, d, _ in evaluating})
        assert all((d - cached) % n_batch == 0 or d == prompt for _, d, _ in evaluating)
        assert generating[-1] == ("generating", generated, generating[-1][2])
        assert [r for r in log if r[0] != "eval"] == evaluating + generating, "evaluation is reported first"


class Clock:
    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_progress_is_reported_at_most_ten_times_a_second_but_keeps_each_stages_first_and_last() -> None:
    seen: list[tuple] = []
    stuck = Throttled(lambda *r: seen.append(r), clock=Clock(0.0))
    stuck("evaluating", 0, 900)
    stuck("evaluating", 512, 900)
    stuck("evaluating", 900, 900, last=True)
    for n in range(1, 201):
        stuck("generating", n, 256)
    stuck("generating", 200, 256, last=True)
    assert seen == [("evaluating", 0, 900), ("evaluating", 900, 900), ("generating", 1, 256), ("generating", 200, 256)]

    seen.clear()
    steady = Throttled(lambda *r: seen.append(r), clock=Clock(0.04))
    for n in range(1, 101):
        steady("generating", n, 256)
    steady("generating", 100, 256, last=True)
    # A token every 0.04 s: the first, then every third one (0.12 s on), which lands on the last.
    assert len(seen) == 34 and seen[0] == ("generating", 1, 256) and seen[-1] == ("generating", 100, 256)


@pytest.mark.slow
def test_a_reporter_that_raises_does_not_fail_the_call(model) -> None:
    calls = []

    def broken(*report) -> None:
        calls.append(report)
        raise BrokenPipeError("the terminal went away")

    prompt = model.render([Message("user", "Say hi.")])
    completion = model.complete(prompt, schema=None, max_tokens=4, progress=broken)
    assert completion.stats.completion_tokens > 0
    assert len(calls) == 1, "a broken reporter is left alone after its first failure"


@pytest.fixture
def scripted_endpoint(tmp_path: Path):
    from tests.helpers import free_port, wait_for_port
    from tests.helpers.model_server import Script, serve

    script = tmp_path / "script.json"
    script.write_text(json.dumps({"delay_s": 0.0, "replies": [{"action": "a", "n": 1}]}))
    port = free_port()
    threading.Thread(target=serve, args=(port, Script(script)), daemon=True).start()
    wait_for_port(port)
    return f"http://127.0.0.1:{port}"


@pytest.mark.slow
def test_an_endpoint_reports_the_whole_prompt_once_then_each_streamed_chunk(scripted_endpoint: str) -> None:
    remote = HttpModel(scripted_endpoint, template_from=smoke_model_path(), n_ctx=2048)
    prompt = remote.render([Message("user", "Choose a and 1.")])
    seen: list[tuple] = []
    completion = remote.complete(prompt, schema=SCHEMA, max_tokens=48, progress=lambda *r: seen.append(r))
    assert json.loads(completion.text) == {"action": "a", "n": 1}
    assert seen == [("evaluating", 0, remote.count(prompt)), ("generating", 1, 48)]


def reports(task_id: str, step: int, cached: int, prompt: int, outcome: str) -> list[Progress]:
    p = lambda stage, done=0, total=0, detail="": Progress(task_id, step, stage, done, total, detail)  # noqa: E731  a shorthand for the list below
    return [
        p("deciding"), p("evaluating", cached, prompt), p("evaluating", prompt, prompt), p("generating", 9, 256),
        p("running_tool", detail="read_file"), p("decided", detail=outcome),
    ]


def test_the_board_holds_each_deciding_tasks_latest_stage_until_its_decision_ends() -> None:
    board = Board()
    a, b = reports("t-a", 3, 0, 2400, "called read_file -> ok"), reports("t-b", 1, 0, 300, "answered")
    board(a[0])
    board(a[1])
    board(b[0])
    version, latest = board.snapshot()
    assert latest == {"t-a": a[1], "t-b": b[0]} and board.get("t-a") == a[1]
    board(a[5])
    assert board.get("t-a") is None and board.snapshot()[0] > version, "a decided task leaves the board"
    board.clear("t-b")
    assert board.snapshot()[1] == {}
    before = board.snapshot()[0]
    board.clear("t-b")
    assert board.snapshot()[0] == before, "clearing what is not there changes nothing"


def test_the_tally_says_what_each_decision_came_to_with_its_tokens_and_time() -> None:
    tally = Tally(clock=Clock(0.5))
    first = [tally(r) for r in reports("t-a", 3, 2000, 2400, "called read_file -> ok")]
    assert first[:-1] == [None] * 5
    # A refused reply and its retry: both attempts' uncached tokens count, the prompt is the last one's.
    retry = reports("t-a", 4, 2400, 2450, "answered (after 1 refused reply)")
    retry[4:4] = [Progress("t-a", 4, "evaluating", 2449, 2480), Progress("t-a", 4, "generating", 3, 256)]
    second = [tally(r) for r in retry]
    assert first[-1] == Decided("t-a", 3, "called read_file -> ok", 2400, 400, 2.5)
    assert second[-1] == Decided("t-a", 4, "answered (after 1 refused reply)", 2480, 81, 3.5)


# -- the daemon: a log line per decision, the page live ------------------------------------------------


def served_task(agentd, tmp_path: Path, replies: list, *submit: str):
    from tests.helpers import serving

    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    return serving(agentd, tmp_path, replies, (*submit, "When is the release?"))


def phase_of(agentd, env: dict, task_id: str) -> str:
    shown = agentd("task", "show", task_id, "--json", env=env)
    return json.loads(shown.stdout)["summary"]["phase"] if shown.returncode == 0 else ""


@pytest.mark.slow
def test_serve_logs_one_line_per_decision_with_its_outcome_tokens_and_seconds(agentd, tmp_path: Path) -> None:
    from tests.helpers import wait_until

    replies = [
        {"action": "call_tool", "tool": "read_file", "arguments": {"path": "notes.txt"}, "reason": "look"},
        {"action": "final_answer", "answer": "March 3", "sources": ["notes.txt"]},
    ]
    with served_task(agentd, tmp_path, replies) as (env, task_id):
        assert wait_until(lambda: phase_of(agentd, env, task_id) == "completed"), phase_of(agentd, env, task_id)
        calls = json.loads(agentd("task", "show", task_id, "--calls", "--json", env=env).stdout)
    lines = [json.loads(line) for line in (tmp_path / "data" / "logs" / "agentd.log").read_text().splitlines()]
    decided = [line for line in lines if line.get("event") == "decided"]
    assert [(d["task_id"], d["step"], d["outcome"]) for d in decided] == [
        (task_id, 1, "called read_file notes.txt -> ok"), (task_id, 2, "answered")
    ]
    # An endpoint does not say what it had cached: the whole prompt counts as evaluated.
    assert [(d["prompt_tokens"], d["evaluated_tokens"]) for d in decided] == [
        (c["prompt_tokens"], c["prompt_tokens"]) for c in calls
    ]
    assert all(d["seconds"] > 0 for d in decided)


@pytest.mark.slow
def test_a_tasks_open_page_shows_what_it_is_doing_now_without_a_reload(agentd, browser, tmp_path: Path) -> None:
    from urllib.parse import urlsplit

    from tests.helpers.browser import phase_shown, screenshot, signed_in

    # Each reply takes the endpoint a second, long enough to see; the task lists files until its step cap.
    replies = [{"action": "call_tool", "tool": "list_files", "arguments": {"path": "n-{n}"}, "reason": "look"}]
    with served_task(agentd, tmp_path, replies, "--max-steps", "6") as (env, task_id):
        with signed_in(browser, env) as (page, base):
            with page.expect_response(lambda r: urlsplit(r.url).path == "/stream", timeout=10_000):
                page.goto(f"{base}tasks/{task_id}")
            page.evaluate("window.sameDocument = true")
            # The page fetches itself again when the log moves; refused that, only the stream's progress
            # events can change what it shows.
            page.route(f"**/tasks/{task_id}", lambda route: route.abort())
            page.wait_for_function(
                "() => /^step \\d+: evaluating [\\d,]+ of [\\d,]+ prompt tokens$/"
                ".test(document.querySelector('#now .now-line')?.textContent || '')",
                timeout=30_000,
            )
            shown = page.locator("#now .now-line").text_content()
            assert page.locator("#now progress.now-bar").is_visible(), f"no bar beside {shown!r}"
            screenshot(page, tmp_path / "now.png")
            assert page.evaluate("window.sameDocument === true"), "the page reloaded instead of updating"
            page.unroute(f"**/tasks/{task_id}")
            # Once the task has stopped, it is doing nothing: its page has no Now line.
            assert phase_shown(page, "failed", timeout=60) == "failed"
            assert page.locator("#now").count() == 0

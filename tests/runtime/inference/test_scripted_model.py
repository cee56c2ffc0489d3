"""The scripted model agentd ships for tests: replies in order, a clear end of the script, deterministic
ChatML and counts on its own, the figures a session's cache would give, and a real model's template and
tokenizer when it is given one."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from runtime.errors import ContextOverflow, InferenceError
from runtime.inference.model import Message, Model
from runtime.inference.scripted import ScriptedModel, ScriptExhausted, chatml, stand_in_tokens

MESSAGES = [Message("system", "You read files."), Message("user", "When is the release?")]


def ask(model: ScriptedModel, prompt: str = "When is the release?", **kw):
    return model.complete(prompt, schema=None, max_tokens=kw.pop("max_tokens", 64), **kw)


def test_replies_come_back_in_order_whatever_the_prompt() -> None:
    model = ScriptedModel(["first", "second", "third"])
    assert [ask(model, p).text for p in ("a", "a", "something else")] == ["first", "second", "third"]
    assert model.prompts == ["a", "a", "something else"]
    assert model.replies == []


def test_a_dict_reply_is_sent_as_its_json() -> None:
    reply = {"action": "final_answer", "answer": "March 3", "sources": ["notes.txt"]}
    model = ScriptedModel([reply])
    completion = ask(model)
    assert json.loads(completion.text) == reply
    assert completion.finish_reason == "stop"


def test_a_call_past_the_end_of_the_script_is_refused_naming_the_call_and_the_script() -> None:
    model = ScriptedModel(["one", "two"])
    ask(model)
    ask(model)
    with pytest.raises(ScriptExhausted, match="call 3 asked scripted for a reply, and the script held 2 replies"):
        ask(model)
    assert issubclass(ScriptExhausted, InferenceError), "the loop treats it as any model failure"
    assert len(model.prompts) == 2, "the refused call is not recorded as asked"


def test_each_call_keeps_its_prompt_and_schema_and_stats_say_what_is_left() -> None:
    schema = {"type": "object"}
    model = ScriptedModel(["a", "b", "c"], name="script-1")
    model.complete("p1", schema=schema, max_tokens=8)
    model.complete("p2", schema=None, max_tokens=8)
    assert (model.prompts, model.schemas) == (["p1", "p2"], [schema, None])
    assert model.stats() == {"model": "script-1", "n_ctx": 32768, "calls": 2, "replies_left": 1}


def test_on_its_own_it_renders_chatml_and_counts_the_same_every_time() -> None:
    model = ScriptedModel([])
    prompt = model.render(MESSAGES)
    assert prompt == chatml(MESSAGES) == (
        "<|im_start|>system\nYou read files.<|im_end|>\n"
        "<|im_start|>user\nWhen is the release?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert isinstance(model, Model)
    # Special tokens are one piece each, as a real tokenizer takes them.
    assert model.tokenize("<|im_start|>user") == model.tokenize("<|im_start|>") + model.tokenize("user")
    assert model.count(prompt) == len(model.tokenize(prompt)) == 27
    assert ScriptedModel(["x"]).tokenize(prompt) == model.tokenize(prompt) == stand_in_tokens(prompt)
    assert model.count('{"action": "call_tool"}') == 10


def test_a_session_s_next_prompt_reports_the_prefix_it_shares_with_the_last_as_cached() -> None:
    model = ScriptedModel(["r1", "r2", "r3", "r4"])
    first = "<|im_start|>system\nYou read files.<|im_end|>\n<|im_start|>user\nstep one"
    second = "<|im_start|>system\nYou read files.<|im_end|>\n<|im_start|>user\nstep two, later"
    one = ask(model, first, session="t-1").stats
    two = ask(model, second, session="t-1").stats
    other = ask(model, second, session="t-2").stats
    again = ask(model, second, session="t-1").stats
    assert (one.prompt_tokens, one.cached_tokens, one.evaluated_tokens) == (17, 0, 17)
    assert (two.prompt_tokens, two.cached_tokens, two.evaluated_tokens) == (20, 16, 4)
    assert (other.cached_tokens, other.evaluated_tokens) == (0, 20), "another session has a cache of its own"
    assert (again.cached_tokens, again.evaluated_tokens) == (20, 0)
    assert (one.completion_tokens, one.ttft_s, one.generation_s) == (model.count("r1"), 0.0, 0.0)


def test_progress_is_reported_as_a_real_model_reports_it() -> None:
    model = ScriptedModel(["first reply", "second"])
    seen: list[tuple[str, int, int]] = []
    ask(model, "one two three", session="s", progress=lambda *report: seen.append(report))
    ask(model, "one two three four", session="s", progress=lambda *report: seen.append(report), max_tokens=32)
    assert seen == [
        ("evaluating", 0, 5), ("evaluating", 5, 5), ("generating", 3, 64),
        ("evaluating", 5, 7), ("evaluating", 7, 7), ("generating", 1, 32),
    ]


def test_a_broken_progress_callback_never_fails_the_call() -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("the display went away")

    assert ask(ScriptedModel(["still here"]), progress=broken).text == "still here"


def test_a_prompt_over_the_window_is_refused_before_a_reply_is_used() -> None:
    model = ScriptedModel(["kept"], n_ctx=64)
    with pytest.raises(ContextOverflow, match="more than the 64-token context of scripted"):
        ask(model, "word " * 40, max_tokens=8)
    with pytest.raises(InferenceError, match="empty"):
        ask(model, "")
    assert model.replies == ["kept"] and model.prompts == []


def test_evaluating_needs_a_real_model_to_evaluate_with() -> None:
    with pytest.raises(ValueError, match="like="):
        ScriptedModel(["x"], evaluate=True)
    with pytest.raises(ValueError, match="like="):
        ScriptedModel(["x"], generate=True)


def test_the_async_call_answers_from_the_same_script_one_call_at_a_time() -> None:
    model = ScriptedModel(["a", "b", "c"])

    async def main() -> list[str]:
        results: list[str] = []

        async def one(prompt: str) -> None:
            results.append((await model.acomplete(prompt, schema=None, max_tokens=8, session=prompt)).text)

        async with anyio.create_task_group() as tg:
            for prompt in ("x", "y", "z"):
                tg.start_soon(one, prompt)
        return results

    assert sorted(anyio.run(main)) == ["a", "b", "c"]
    assert sorted(model.prompts) == ["x", "y", "z"]


def test_a_script_that_runs_out_fails_the_task_with_the_reason(store, tmp_path: Path) -> None:
    from store.events import TaskPhaseChanged
    from tests.helpers import call, events, make_runtime, run, submit

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("March 3\n")
    rt = make_runtime(store, ScriptedModel([call("read_file", path="notes.txt")]), tmp_path)
    task_id = submit(store, workspace)
    assert run(rt, task_id) == "failed"
    reason = events(store, task_id, TaskPhaseChanged)[-1].reason
    assert reason == (
        "the model failed: the script ran out: call 2 asked scripted for a reply, and the script held 1 reply"
    )


def test_given_a_real_model_it_renders_counts_and_evaluates_with_that_one(model) -> None:
    like = ScriptedModel(["scripted answer", "again"], like=model)
    prompt = like.render(MESSAGES)
    assert prompt == model.render(MESSAGES)
    assert like.tokenize(prompt) == model.tokenize(prompt) and like.count(prompt) == model.count(prompt)
    assert like.n_ctx == model.n_ctx
    completion = ask(like, prompt, session="real")
    assert completion.text == "scripted answer"
    assert (completion.stats.prompt_tokens, completion.stats.completion_tokens) == (
        model.count(prompt), model.count("scripted answer")
    )
    assert like.stats()["like"]["model"] == model.name

    evaluated = ScriptedModel(["scripted answer"], like=model, evaluate=True)
    real = ask(evaluated, prompt, session="evaluated").stats
    assert real.prompt_tokens == model.count(prompt)
    assert real.completion_tokens == 1 and real.ttft_s > 0, "the real model evaluated the prompt and made one token"

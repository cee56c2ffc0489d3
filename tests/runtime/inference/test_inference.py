"""The inference layer against the real smoke model: template, counts, schemas, prefix reuse, sessions, HTTP."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import anyio
import pytest

from runtime.agent import proposal
from runtime.errors import ContextOverflow, InferenceError, ModelFileError
from runtime.inference.grammar import schema_grammar
from runtime.inference.http import HttpModel
from runtime.inference.local import LocalModel, load_model
from runtime.inference.model import ABANDON_GRACE_S, Message, Model
from runtime.inference.model_file import smoke_model_path
from tests.helpers import free_port
from tests.helpers.prompt import SCHEMA, rules

pytestmark = pytest.mark.slow


def conversation(topic: str, count: int, question: str) -> list[Message]:
    return [Message("system", rules(topic, count)), Message("user", question)]


def assert_valid(text: str) -> dict:
    value = json.loads(text)
    assert set(SCHEMA["required"]) <= value.keys()
    assert value["action"] in ("a", "b")
    assert isinstance(value["n"], int) and not isinstance(value["n"], bool)
    return value


def record_evals(llm, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of tokens of each llama.cpp evaluation from now on; the first is the prompt's."""
    sizes: list[int] = []
    evaluate = llm._llama.eval

    def recording_eval(tokens):
        sizes.append(len(tokens))
        return evaluate(tokens)

    monkeypatch.setattr(llm._llama, "eval", recording_eval)
    return sizes


@pytest.fixture(scope="module")
def model_path() -> Path:
    return smoke_model_path()


@pytest.fixture(scope="module")
def model(model_path: Path):
    loaded = load_model(model_path)
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def model_without_lru(model_path: Path):
    loaded = LocalModel(model_path, n_ctx=2048, kv_cache_bytes=0)
    yield loaded
    loaded.close()


def test_load_model_gives_a_model_with_the_trained_context(model) -> None:
    assert isinstance(model, Model)
    assert model.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert model.n_ctx == model.n_ctx_train == 8192


def test_render_uses_the_models_chatml_template(model) -> None:
    prompt = model.render([Message("system", "Be brief."), Message("user", "Hi")])
    assert prompt == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    # The template's own default system prompt appears when the caller gives none.
    assert model.render([Message("user", "Hi")]).startswith("<|im_start|>system\nYou are a helpful AI assistant")


def test_a_model_without_a_template_is_refused_at_load(untemplated_gguf: Path) -> None:
    # Refused when loaded, before any task could reach its first prompt.
    with pytest.raises(ModelFileError, match=f"{untemplated_gguf} carries no chat template"):
        LocalModel(untemplated_gguf, n_ctx=256)


def test_count_matches_the_tokens_evaluated(model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = LocalModel(model_path, n_ctx=512)
    try:
        prompt = fresh.render(conversation("billing", 5, "Which rule covers request 3?"))
        tokens = fresh.tokenize(prompt)
        evals = record_evals(fresh, monkeypatch)
        completion = fresh.complete(prompt, schema=None, max_tokens=4)
        stats = completion.stats
        assert stats.prompt_tokens == fresh.count(prompt) == len(tokens) == evals[0]
        assert (stats.cached_tokens, stats.evaluated_tokens) == (0, len(tokens))
        # What llama.cpp evaluated starts with exactly the tokens counted: no extra BOS, specials parsed.
        assert fresh._llama.input_ids[: len(tokens)].tolist() == tokens
        assert tokens.count(fresh._llama.token_bos()) == 3  # <|im_start|> is this model's BOS
    finally:
        fresh.close()


def test_schema_constrained_completion_is_valid_json(model) -> None:
    prompt = model.render(
        [
            Message("system", 'Answer with a JSON object like {"action": "a", "n": 1}.'),
            Message("user", "Choose action b and the number 7."),
        ]
    )
    completion = model.complete(prompt, schema=SCHEMA, max_tokens=48, session="schema")
    assert completion.finish_reason == "stop"
    assert_valid(completion.text)
    assert completion.stats.completion_tokens > 0
    assert completion.stats.ttft_s > 0 and completion.stats.generation_s > 0
    # The grammar is built once per schema text.
    assert schema_grammar(dict(SCHEMA)) is schema_grammar(SCHEMA)


def test_second_call_extending_the_first_reuses_its_prefix(model, monkeypatch: pytest.MonkeyPatch) -> None:
    messages = conversation("shipping", 20, "Which rule covers request 4?")
    first_prompt = model.render(messages)
    first = model.complete(first_prompt, schema=None, max_tokens=16, session="extend")
    n_first = model.count(first_prompt)
    assert first.stats.cached_tokens < 10  # only the template's opening tokens were shared with anything

    second_prompt = model.render([*messages, Message("assistant", first.text), Message("user", "And request 5?")])
    evals = record_evals(model, monkeypatch)
    second = model.complete(second_prompt, schema=None, max_tokens=16, session="extend")
    assert evals[0] == second.stats.evaluated_tokens  # what llama.cpp evaluated, not only what we predicted
    assert second.stats.cached_tokens >= n_first - 2
    assert second.stats.evaluated_tokens == second.stats.prompt_tokens - second.stats.cached_tokens
    assert second.stats.evaluated_tokens <= model.count(second_prompt) - n_first + 2
    assert second.stats.ttft_s < first.stats.ttft_s


@pytest.mark.parametrize("fixture", ["model", "model_without_lru"])
def test_interleaved_sessions_keep_their_prefixes_only_with_the_lru(
    fixture: str, request, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = request.getfixturevalue(fixture)
    hits_before = llm.stats()["kv_cache"]["hits"]
    a_messages = conversation(f"refund {fixture}", 12, "Which rule covers request 2?")
    a_prompt = llm.render(a_messages)
    a_first = llm.complete(a_prompt, schema=None, max_tokens=8, session=f"A-{fixture}")
    b_prompt = llm.render(conversation(f"warranty {fixture}", 12, "Rule 3?"))
    llm.complete(b_prompt, schema=None, max_tokens=8, session=f"B-{fixture}")
    a_again = llm.render([*a_messages, Message("assistant", a_first.text), Message("user", "And request 6?")])
    evals = record_evals(llm, monkeypatch)
    third = llm.complete(a_again, schema=None, max_tokens=8, session=f"A-{fixture}")
    assert evals[0] == third.stats.evaluated_tokens

    kv = llm.stats()["kv_cache"]
    if fixture == "model":
        assert third.stats.cached_tokens >= llm.count(a_prompt) - 2
        assert kv["hits"] == hits_before + 1
    else:
        assert third.stats.cached_tokens < 20  # the opening A and B share
        assert kv["hits"] == 0 and kv["entries"] == 0 and kv["rejected"] >= 2


def test_the_lru_evicts_least_recently_used_states_by_bytes(model_path: Path) -> None:
    # Each session below holds about 100 tokens, about 2.4 MB of state: one fits in 4 MB, two do not.
    capacity = 4 * 2**20
    small = LocalModel(model_path, n_ctx=512, kv_cache_bytes=capacity)
    try:
        prompts = {s: small.render(conversation(f"topic {s}", 5, f"Rule {i}?")) for i, s in enumerate("ABC")}
        assert all(70 <= small.count(p) <= 150 for p in prompts.values())
        for session in "ABC":
            small.complete(prompts[session], schema=None, max_tokens=4, session=session)
        kv = small.stats()["kv_cache"]
        # A was saved when B came, B when C came: A, least recently used, made room for B.
        assert (kv["entries"], kv["evictions"], kv["misses"]) == (1, 1, 3)
        assert 0 < kv["bytes"] <= capacity

        back_to_b = small.complete(prompts["B"], schema=None, max_tokens=4, session="B")
        assert back_to_b.stats.cached_tokens >= small.count(prompts["B"]) - 1
        back_to_a = small.complete(prompts["A"], schema=None, max_tokens=4, session="A")
        assert back_to_a.stats.cached_tokens < 20  # the opening the three prompts share
        kv = small.stats()["kv_cache"]
        assert (kv["hits"], kv["misses"]) == (1, 4)
    finally:
        small.close()


def test_context_overflow_is_raised_before_anything_is_evaluated(model_path: Path) -> None:
    small = LocalModel(model_path, n_ctx=512)
    try:
        too_long = small.render(conversation("audit", 40, "Which rule?"))
        assert small.count(too_long) > 512
        started = time.perf_counter()
        with pytest.raises(ContextOverflow, match=r"more than the 512-token context"):
            small.complete(too_long, schema=None, max_tokens=16)
        assert time.perf_counter() - started < 1.0
        fits_alone = small.render(conversation("audit", 10, "Which rule?"))
        n = small.count(fits_alone)
        assert n < 512
        with pytest.raises(ContextOverflow, match=rf"prompt \({n} tokens\) plus up to {513 - n} answer tokens"):
            small.complete(fits_alone, schema=None, max_tokens=513 - n)
        with pytest.raises(InferenceError, match="empty"):
            small.complete("", schema=None, max_tokens=4)
        assert small.stats()["loaded_tokens"] == 0
    finally:
        small.close()


@pytest.mark.anyio
async def test_acomplete_from_concurrent_tasks_is_serialized(model, monkeypatch: pytest.MonkeyPatch) -> None:
    active = 0
    most_active = 0
    guard = threading.Lock()
    generate = model._llama.generate

    def watched_generate(*args, **kwargs):
        nonlocal active, most_active
        with guard:
            active += 1
            most_active = max(most_active, active)
        try:
            yield from generate(*args, **kwargs)
        finally:
            with guard:
                active -= 1

    monkeypatch.setattr(model._llama, "generate", watched_generate)
    results = {}

    async def ask(session: str, topic: str) -> None:
        prompt = model.render(conversation(topic, 3, "Pick an action."))
        results[session] = await model.acomplete(prompt, schema=SCHEMA, max_tokens=32, session=session)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, "async-1", "parcels")
        tg.start_soon(ask, "async-2", "letters")

    assert most_active == 1
    assert set(results) == {"async-1", "async-2"}
    for completion in results.values():
        assert_valid(completion.text)


@pytest.mark.anyio
async def test_an_abandoned_call_stops_between_batches_and_the_next_one_answers_as_a_fresh_one(
    model_without_lru,
) -> None:
    llm = model_without_lru
    prompt = llm.render(conversation("abandoned", 60, "Pick an action."))
    assert llm.count(prompt) > 2 * llm._llama.n_batch, "several batches to stop between"
    first_batch = threading.Event()

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "evaluating" and done > 0:
            first_batch.set()

    async def ask() -> None:
        await llm.acomplete(prompt, schema=SCHEMA, max_tokens=16, session="abandoned", progress=progress)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        while not first_batch.is_set():
            await anyio.sleep(0.01)
        cancelled_at = time.monotonic()
        tg.cancel_scope.cancel()
    # The caller waits for the call at most the grace: a batch of the prompt can take longer than
    # that on a busy machine, and the call stops only once it is evaluated.
    assert time.monotonic() - cancelled_at < ABANDON_GRACE_S + 1
    while llm.calling:
        await anyio.sleep(0.05)
    again = await llm.acomplete(prompt, schema=SCHEMA, max_tokens=16, session="abandoned")
    assert 0 < again.stats.cached_tokens < again.stats.prompt_tokens, "what it evaluated before it stopped is reused"
    llm._llama.reset()
    fresh = await llm.acomplete(prompt, schema=SCHEMA, max_tokens=16, session="abandoned")
    assert (again.text, fresh.stats.cached_tokens) == (fresh.text, 0)


SERVER_DEPENDENCIES = ("fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
SERVER_MISSING = [name for name in SERVER_DEPENDENCIES if importlib.util.find_spec(name) is None]


@pytest.fixture(scope="module")
def server_url(model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    # The dev dependencies include the server; without it this is a broken install, not a reason to skip.
    assert not SERVER_MISSING, f"llama-cpp-python's server needs {', '.join(SERVER_MISSING)} (make install-dev)"
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--n_ctx", "1024", "--flash_attn", "true", "--verbose", "false"]
    # Its log goes to a file: a pipe nobody reads would stall the server once full.
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(f"{url}/v1/models", timeout=1).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        output = log_path.read_text(errors="replace")[-500:]
                        raise RuntimeError(f"llama_cpp.server did not start: {output}") from None
                    time.sleep(0.2)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=10)


def test_http_model_against_llama_cpp_python_server(server_url: str, model, model_path: Path) -> None:
    remote = HttpModel(server_url, template_from=model_path, n_ctx=1024)
    assert isinstance(remote, Model)
    messages = [
        Message("system", 'Answer with a JSON object like {"action": "a", "n": 1}.'),
        Message("user", "Choose b and 2."),
    ]
    prompt = remote.render(messages)
    assert prompt == model.render(messages)
    assert remote.count(prompt) == model.count(prompt)

    completion = remote.complete(prompt, schema=SCHEMA, max_tokens=48)
    assert completion.finish_reason == "stop"
    assert_valid(completion.text)
    assert completion.stats.prompt_tokens == model.count(prompt)
    assert completion.stats.completion_tokens > 0

    with pytest.raises(ContextOverflow, match="1024-token context"):
        remote.complete(prompt, schema=None, max_tokens=1024)
    with pytest.raises(InferenceError, match="chat template"):
        HttpModel(server_url, n_ctx=1024)  # llama-cpp-python's server does not expose its template


def test_http_model_reports_an_endpoint_that_does_not_answer(model_path: Path) -> None:
    with pytest.raises(InferenceError, match="did not respond"):
        HttpModel(f"http://127.0.0.1:{free_port()}", template_from=model_path, n_ctx=1024)


def test_the_grammars_kept_for_reuse_are_bounded(model) -> None:
    """Every decision cites a different set of ids, so it has a grammar of its own: a long-running
    daemon must not keep them all."""
    from runtime.inference.grammar import GBNF_CACHE_SIZE

    for n in range(GBNF_CACHE_SIZE + 5):
        model._grammar({"type": "object", "properties": {"id": {"enum": [f"result:c{n}"]}}, "required": ["id"]})
    assert len(model._grammars) == GBNF_CACHE_SIZE
    assert not any("result:c0" in g for g in model._grammars)


def _allowed_after(model: LocalModel, gbnf: str, prefix: str, candidate: str) -> bool:
    """Whether llama.cpp's grammar sampler lets `candidate` (one token) follow `prefix`."""
    import ctypes

    import llama_cpp

    llm = model._llama
    sampler = llama_cpp.llama_sampler_init_grammar(llama_cpp.llama_model_get_vocab(llm.model), gbnf.encode(), b"root")
    try:
        for token in llm.tokenize(prefix.encode(), add_bos=False, special=False):
            llama_cpp.llama_sampler_accept(sampler, token)
        [token] = llm.tokenize(candidate.encode(), add_bos=False, special=False)
        data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(llama_cpp.llama_token_data_array(data, 1, -1, False)))
        return data[0].logit != float("-inf")
    finally:
        llama_cpp.llama_sampler_free(sampler)


def test_the_grammar_keeps_raw_control_characters_out_of_json_strings(model: LocalModel) -> None:
    """llama-cpp-python's converter allowed a raw line break inside a string, which json.loads refuses:
    an answer written so failed a task whose work was done. An escaped one is still allowed."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    gbnf = schema_grammar(schema)
    assert not _allowed_after(model, gbnf, '{"answer": "a', "\n")
    assert not _allowed_after(model, gbnf, '{"answer": "a', "\t")
    assert _allowed_after(model, gbnf, '{"answer": "a', "b")
    assert _allowed_after(model, gbnf, '{"answer": "a\\', "n")


def test_the_proposal_grammar_opens_every_thought_with_what_the_results_show(model: LocalModel) -> None:
    """Left free, the default model's thought restated the request ("The request does not answer the
    request.") and its answer followed it; the grammar opens the thought the same way every time."""
    gbnf = schema_grammar(proposal.schema({"read_file": {"type": "object"}}, skills=[], citable=["workspace"]))
    assert _allowed_after(model, gbnf, '{"thought": "', "The")
    assert not _allowed_after(model, gbnf, '{"thought": "', "I")
    assert not _allowed_after(model, gbnf, '{"thought": "The', " request")
    assert _allowed_after(model, gbnf, '{"thought": "The results show ', "three")
    assert not _allowed_after(model, gbnf, '{"thought": "The results show three', "\n")
    # Before any result there is nothing to say it shows: the thought is free.
    free = schema_grammar(proposal.schema({"read_file": {"type": "object"}}, [], citable=["workspace"], results=False))
    assert _allowed_after(model, free, '{"thought": "', "I")

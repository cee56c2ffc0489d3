"""The model behind every decision: the model's own chat template, schema-constrained completions, prefix reuse."""

from __future__ import annotations

import functools
import json
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.to_thread
import numpy as np

from runtime import logs
from runtime.kv_cache import KvStateCache, capture, restore, state_size
from store.errors import AgentdError, ContextOverflow, InferenceError, ModelFileError

DEFAULT_KV_CACHE_BYTES = 768 * 2**20
# Decoding is greedy, so the seed only matters to samplers agentd does not use; fixed all the same, so that
# a replay asks llama.cpp exactly what the original call asked.
SEED = 20251
GBNF_CACHE_SIZE = 64
# Progress reports are for people watching; more than about ten a second is noise that costs a redraw each.
PROGRESS_INTERVAL_S = 0.1

# `progress(stage, done, total)`: "evaluating" with the prompt tokens in the KV cache so far of the prompt's
# tokens (the first report says how many were cached already), then "generating" with tokens generated of
# at most max_tokens. Called from the thread the model runs in.
ProgressFn = Callable[[str, int, int], None]

log = logs.get_logger("agentd.inference")


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class CallStats:
    """Token counts and timings of one completion.

    `cached_tokens` is the prompt prefix found already evaluated in the model's KV cache and
    `evaluated_tokens` the rest; both are None when an HTTP endpoint does not report them.
    `ttft_s` runs from the start of the call (after waiting for the model) to the first generated token,
    so it holds switching sessions and evaluating the prompt; `generation_s` runs from there to the last token.
    """

    prompt_tokens: int
    cached_tokens: int | None
    evaluated_tokens: int | None
    completion_tokens: int
    ttft_s: float
    generation_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Completion:
    text: str
    stats: CallStats
    finish_reason: str  # "stop": the model ended its answer; "length": max_tokens was reached first


@runtime_checkable
class Model(Protocol):
    name: str
    n_ctx: int

    def render(self, messages: Sequence[Message]) -> str: ...

    def tokenize(self, text: str) -> list[int]: ...

    def count(self, text: str) -> int: ...

    def complete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
    ) -> Completion: ...

    async def acomplete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
    ) -> Completion: ...

    def stats(self) -> dict[str, Any]: ...


class ChatTemplate:
    """A model's Jinja chat template, rendered exactly as llama-cpp-python renders it for chat completions."""

    def __init__(self, source: str, *, bos_token: str, eos_token: str, origin: str) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.source = source
        self.origin = origin
        self._formatter = Jinja2ChatFormatter(
            template=source, bos_token=bos_token, eos_token=eos_token, add_generation_prompt=True
        )

    @classmethod
    def of_model(cls, model, origin: str) -> ChatTemplate | None:
        """The template in a loaded model's GGUF metadata (a `llama_cpp._internals.LlamaModel`), if any."""
        source = model.metadata().get("tokenizer.chat_template")
        if not source:
            return None
        return cls(
            source,
            bos_token=_token_text(model, model.token_bos()),
            eos_token=_token_text(model, model.token_eos()),
            origin=origin,
        )

    def render(self, messages: Sequence[Message]) -> str:
        try:
            return self._formatter(messages=[{"role": m.role, "content": m.content} for m in messages]).prompt
        except Exception as e:  # the template's own raise_exception() and Jinja errors alike
            raise InferenceError(f"the chat template of {self.origin} refused the messages: {e}") from e


def _token_text(model, token: int) -> str:
    return model.token_get_text(token) if token != -1 else ""


def _no_template(origin: str) -> ModelFileError:
    return ModelFileError(
        f"{origin} carries no chat template (GGUF key tokenizer.chat_template), so agentd cannot build "
        "prompts for it; use a chat/instruct model"
    )


@functools.lru_cache(maxsize=GBNF_CACHE_SIZE)
def _gbnf_for_schema_text(schema_text: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(schema_text)


# llama.cpp's converter spells out every position of a string length limit as nested optional rules;
# limits in the thousands (a path, a file's content) make a grammar llama.cpp refuses. Those are
# left to validation after the call (and to max_tokens); short ones stay, so a reason stays short.
GRAMMAR_MAX_LENGTH = 256


def grammar_schema(node):
    """`schema` without the length limits too long for a grammar; shape, enums and short limits stay."""
    if isinstance(node, dict):
        return {
            k: grammar_schema(v)
            for k, v in node.items()
            if not (k in ("maxLength", "minLength") and isinstance(v, int) and v > GRAMMAR_MAX_LENGTH)
        }
    if isinstance(node, list):
        return [grammar_schema(v) for v in node]
    return node


# llama-cpp-python's converter lets a JSON string hold raw control characters (its `char` is [^"\\]):
# seen here, an answer with a literal line break, which json.loads refuses, failed a task whose file
# edit had already succeeded. JSON allows no control character unescaped; llama.cpp's own json.gbnf
# says so, and so does the grammar here.
_LOOSE_CHAR = r'char ::= [^"\\] |'
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'


def schema_grammar(schema: dict) -> str:
    """The GBNF grammar llama.cpp samples under for `schema`, converted once per distinct schema text."""
    # No sort_keys: property order in the schema is the order the model must write them in.
    text = json.dumps(grammar_schema(schema), ensure_ascii=False, separators=(",", ":"))
    try:
        return _gbnf_for_schema_text(text).replace(_LOOSE_CHAR, _JSON_CHAR)
    except Exception as e:
        raise InferenceError(f"the JSON schema cannot be turned into a grammar: {e}") from e


def check_fits(prompt_tokens: int, max_tokens: int, n_ctx: int, name: str) -> None:
    if max_tokens < 1:
        raise InferenceError(f"max_tokens must be at least 1, not {max_tokens}")
    if prompt_tokens + max_tokens > n_ctx:
        raise ContextOverflow(
            f"the prompt ({prompt_tokens} tokens) plus up to {max_tokens} answer tokens needs "
            f"{prompt_tokens + max_tokens} tokens, more than the {n_ctx}-token context of {name}; "
            "nothing was evaluated"
        )


class _Throttled:
    """A progress callback called at most once per PROGRESS_INTERVAL_S, but always for the first report
    of a stage and for one marked last; a value it already reported is not repeated. A callback that
    raises is logged once and then left alone: watching must never fail a decision."""

    def __init__(self, report: ProgressFn, clock: Callable[[], float] = time.monotonic) -> None:
        self._report: ProgressFn | None = report
        self._clock = clock
        self._last: tuple[str, int, int] | None = None
        self._at = 0.0

    def __call__(self, stage: str, done: int, total: int, *, last: bool = False) -> None:
        if self._report is None or (stage, done, total) == self._last:
            return
        now = self._clock()
        if not (last or self._last is None or stage != self._last[0] or now - self._at >= PROGRESS_INTERVAL_S):
            return
        self._last, self._at = (stage, done, total), now
        try:
            self._report(stage, done, total)
        except Exception:  # noqa: BLE001  a broken display, never a broken call
            log.warning("progress reporter failed; no more progress for this call", exc_info=True)
            self._report = None


def _throttled(progress: ProgressFn | None) -> _Throttled | None:
    return _Throttled(progress) if progress is not None else None


def common_prefix_length(a: np.ndarray, b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != np.asarray(b[:n], dtype=a.dtype))
    return int(differ[0]) if differ.size else n


class LocalModel:
    """One llama.cpp model in this process; one completion at a time.

    Each call names its session (the task). The context keeps one session's KV cache at a time; when a
    call comes for another session, the current one's state is saved into a byte-bounded LRU and the
    caller's is restored from it if it is there, so interleaved tasks keep their prefixes.
    """

    def __init__(
        self,
        path: Path | str,
        n_ctx: int | None = None,
        *,
        kv_cache_bytes: int = DEFAULT_KV_CACHE_BYTES,
        n_threads: int | None = None,
        seed: int = SEED,
    ) -> None:
        from llama_cpp import Llama  # imported here: loading the native library is slow and few commands need it

        self.path = Path(path)
        try:
            self._llama = Llama(
                model_path=str(self.path),
                n_ctx=n_ctx or 0,  # 0: the context length the model was trained with
                n_threads=n_threads,
                flash_attn=True,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as e:
            raise ModelFileError(f"model file {self.path} could not be loaded by llama.cpp: {e}") from e
        self.n_ctx: int = self._llama.n_ctx()
        self.n_ctx_train: int = self._llama._model.n_ctx_train()
        self.template = ChatTemplate.of_model(self._llama._model, origin=f"model file {self.path}")
        if self.template is None:
            # Refused at load, before any task is touched, rather than at the first prompt.
            self._llama.close()
            raise _no_template(f"model file {self.path}")
        self._bos = self._llama.token_bos()
        self._add_bos = self._llama._model.add_bos_token() and self._bos != -1
        self._lock = threading.Lock()
        # LlamaGrammar per grammar text, each checked once by llama.cpp itself. Bounded: an answer's
        # sources are the ids shown so far, so nearly every decision of a task has a grammar of its own.
        self._grammars: OrderedDict[str, Any] = OrderedDict()
        self._limiter = anyio.CapacityLimiter(1)
        self._kv = KvStateCache(kv_cache_bytes)
        self._loaded_session: str | None = None

    @property
    def name(self) -> str:
        return self.path.name

    def render(self, messages: Sequence[Message]) -> str:
        if self.template is None:
            raise _no_template(f"model file {self.path}")
        return self.template.render(messages)

    def tokenize(self, text: str) -> list[int]:
        """The tokens a completion of `text` evaluates.

        Special-token text (`<|im_start|>`) becomes the special token, since rendered templates carry their
        own. A BOS is added only if the model asks for one and the text does not already start with it.
        """
        tokens = self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if self._add_bos and tokens[:1] != [self._bos]:
            tokens.insert(0, self._bos)
        return tokens

    def count(self, text: str) -> int:
        return len(self.tokenize(text))

    def complete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
    ) -> Completion:
        tokens = self.tokenize(prompt)
        if not tokens:
            raise InferenceError("the prompt is empty")
        check_fits(len(tokens), max_tokens, self.n_ctx, self.name)
        grammar = self._grammar(schema)
        with self._lock:
            started = time.perf_counter()
            try:
                self._switch_to(session)
                return self._generate(tokens, grammar, max_tokens, started, _throttled(progress))
            except AgentdError:
                raise
            except Exception as e:
                # What the context holds after a failed decode is unknown: the next call starts afresh.
                self._llama.reset()
                raise InferenceError(f"llama.cpp failed on {self.name}: {e}") from e

    async def acomplete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
    ) -> Completion:
        # Not abandon_on_cancel: a cancelled caller waits for the thread, so the limiter is never released
        # while llama.cpp still runs.
        call = functools.partial(
            self.complete, prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress
        )
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    def stats(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "path": str(self.path),
            "n_ctx": self.n_ctx,
            "n_ctx_train": self.n_ctx_train,
            "loaded_session": self._loaded_session,
            "loaded_tokens": self._llama.n_tokens,
            "kv_cache": self._kv.stats().as_dict(),
        }

    def close(self) -> None:
        with self._lock:
            self._llama.close()

    def _grammar(self, schema: dict | None):
        if schema is None:
            return None
        gbnf = schema_grammar(schema)
        grammar = self._grammars.get(gbnf)
        if grammar is None:
            grammar = self._grammars[gbnf] = self._checked_grammar(gbnf)
            while len(self._grammars) > GBNF_CACHE_SIZE:
                self._grammars.popitem(last=False)
        else:
            self._grammars.move_to_end(gbnf)
        return grammar

    def _checked_grammar(self, gbnf: str):
        """Parse the grammar once with llama.cpp itself: a grammar it rejects would crash the sampler
        (llama-cpp-python does not check), so it is refused here with a clear error instead."""
        import llama_cpp
        from llama_cpp import LlamaGrammar

        grammar = LlamaGrammar.from_string(gbnf, verbose=False)
        vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar._grammar.encode(), b"root")
        if not sampler:
            raise InferenceError(f"llama.cpp refused the grammar built from the output schema ({len(gbnf)} bytes)")
        llama_cpp.llama_sampler_free(sampler)
        return grammar

    def _switch_to(self, session: str | None) -> None:
        if session == self._loaded_session:
            return
        # Taken out before the outgoing state goes in, so that making room for that one cannot evict it.
        snapshot = self._kv.take(session) if session is not None else None
        if self._loaded_session is not None and self._llama.n_tokens > 0:
            self._save(self._loaded_session)
        self._loaded_session = session
        if snapshot is not None:
            restore(self._llama, snapshot)
        # Otherwise the context keeps what it has: a shared system prompt is still a prefix worth reusing.

    def _save(self, session: str) -> None:
        if not self._kv.fits(state_size(self._llama)):
            self._kv.discard(session)
            self._kv.reject()
            return
        self._kv.put(session, capture(self._llama))

    def _reused_prefix(self, tokens: list[int]) -> int:
        """How many prompt tokens `Llama.generate` will take from the KV cache instead of evaluating."""
        llama = self._llama
        common = common_prefix_length(llama.input_ids[: llama.n_tokens], tokens)
        if common < len(tokens):
            return common
        # The whole prompt is cached. Only logits from a live decode of exactly this prompt can be sampled
        # from; otherwise generate() evaluates the last prompt token again to refresh them.
        if llama.n_tokens == len(tokens) and not llama._requires_eval:
            return common
        return common - 1

    def _evaluate(self, tokens: list[int], cached: int, report: _Throttled) -> None:
        """Evaluate the prompt past its cached prefix in batches of n_batch, reporting the prompt tokens
        in the KV cache after each (the first report is the cached prefix, the last the whole prompt).

        The batches are the ones `Llama.generate` would decode itself: from the same first token (what
        `_reused_prefix` predicts it would reuse), n_batch at a time, the last prompt token in the last
        batch. generate() then finds the whole prompt evaluated with live logits, samples at once, and
        the greedy answer is the one it would have given.
        """
        llama = self._llama
        total = len(tokens)
        report("evaluating", cached, total, last=cached == total)
        if cached == total:
            return
        if cached == 0:
            llama.reset()
        else:
            llama.n_tokens = cached  # eval() drops the KV cells from here on before decoding
        for start in range(cached, total, llama.n_batch):
            llama.eval(tokens[start : start + llama.n_batch])
            done = min(start + llama.n_batch, total)
            report("evaluating", done, total, last=done == total)

    def _generate(
        self, tokens: list[int], grammar, max_tokens: int, started: float, report: _Throttled | None = None
    ) -> Completion:
        import llama_cpp

        llama = self._llama
        cached = self._reused_prefix(tokens)
        if report is not None:
            # Only a watched call evaluates the prompt itself, to say how far it got; otherwise
            # generate() does the same decodes in one go.
            self._evaluate(tokens, cached, report)
        vocab = llama._model.vocab
        answer: list[int] = []
        first_at: float | None = None
        finish_reason = "length"
        stream = llama.generate(tokens, temp=0.0, repeat_penalty=1.0, grammar=grammar)
        with closing(stream):
            for token in stream:
                if first_at is None:
                    first_at = time.perf_counter()
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    finish_reason = "stop"
                    break
                answer.append(token)
                if report is not None:
                    report("generating", len(answer), max_tokens)
                if len(answer) >= max_tokens:
                    break
        ended = time.perf_counter()
        if report is not None:
            report("generating", len(answer), max_tokens, last=True)
        first_at = first_at or ended
        text = llama.detokenize(answer, prev_tokens=tokens).decode("utf-8", errors="replace")
        stats = CallStats(
            prompt_tokens=len(tokens),
            cached_tokens=cached,
            evaluated_tokens=len(tokens) - cached,
            completion_tokens=len(answer),
            ttft_s=first_at - started,
            generation_s=ended - first_at,
        )
        return Completion(text=text, stats=stats, finish_reason=finish_reason)


# The daemon was written against the first loader's name.
LoadedModel = LocalModel


def load_model(path: Path, n_ctx: int | None = None) -> LocalModel:
    """Load the model; `n_ctx=None` uses the context length the model was trained with."""
    return LocalModel(path, n_ctx)


class EndpointError(InferenceError):
    """An HTTP model endpoint failed; `status` is its HTTP status code when it answered at all."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class HttpModel:
    """A model behind an OpenAI-compatible HTTP server, in place of the in-process one.

    agentd still renders the prompt itself and sends the text to `/v1/completions`, so the prompt it
    records is the prompt the server evaluated; the schema goes as a GBNF `grammar`, which both
    llama-cpp-python's server and llama.cpp's `llama-server` accept there. Tokens are counted by the
    server (`/extras/tokenize` on llama-cpp-python, `/tokenize` on llama-server).

    The chat template comes from `template_from` (a local copy of the served GGUF; only its vocabulary
    is read) or else from llama-server's `GET /props`; llama-cpp-python's server does not expose it.
    The context length comes from `n_ctx` or else from `/props`. Sessions are not used: the server
    keeps its own prompt cache.
    """

    def __init__(
        self,
        base_url: str,
        *,
        template_from: Path | None = None,
        n_ctx: int | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._model = model
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._limiter = anyio.CapacityLimiter(1)
        self._tokenize_route: str | None = None
        props = self._props()
        self.n_ctx = n_ctx or props.get("default_generation_settings", {}).get("n_ctx") or 0
        if not self.n_ctx:
            raise InferenceError(f"{self.base_url} does not say its context length (no /props): pass n_ctx")
        self.template = self._template(template_from, props)
        served = model or Path(props.get("model_path") or "").name or (template_from.name if template_from else "")
        self.name = served or self.base_url

    def render(self, messages: Sequence[Message]) -> str:
        return self.template.render(messages)

    def tokenize(self, text: str) -> list[int]:
        if self._tokenize_route is None:
            self._tokenize_route = self._find_tokenize_route()
        if self._tokenize_route == "/extras/tokenize":
            # llama-cpp-python tokenizes with add_bos=True, which llama.cpp honours only if the model asks
            # for a BOS: the same tokens its /v1/completions evaluates.
            return self._post("/extras/tokenize", {"input": text})["tokens"]
        return self._post("/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]

    def count(self, text: str) -> int:
        return len(self.tokenize(text))

    def complete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
    ) -> Completion:
        prompt_tokens = self.count(prompt)
        check_fits(prompt_tokens, max_tokens, self.n_ctx, self.name)
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "repeat_penalty": 1.0,  # both servers default to 1.1, which would change greedy answers
            "seed": SEED,
            "stream": True,
            "cache_prompt": True,
        }
        if schema is not None:
            body["grammar"] = schema_grammar(schema)
        if self._model:
            body["model"] = self._model
        report = _throttled(progress)
        started = time.perf_counter()
        if report is not None:
            # The server does not stream its prompt evaluation: one report that it has the whole prompt.
            report("evaluating", 0, prompt_tokens)
        first_at: float | None = None
        parts: list[str] = []
        chunks = 0
        finish_reason = "length"
        usage: dict = {}
        timings: dict = {}
        for event in self._stream("/v1/completions", body):
            choice = (event.get("choices") or [{}])[0]
            if choice.get("text"):
                if first_at is None:
                    first_at = time.perf_counter()
                parts.append(choice["text"])
                chunks += 1
                if report is not None:
                    report("generating", chunks, max_tokens)
            finish_reason = choice.get("finish_reason") or finish_reason
            usage = event.get("usage") or usage
            timings = event.get("timings") or timings
        ended = time.perf_counter()
        if report is not None:
            report("generating", chunks, max_tokens, last=True)
        first_at = first_at or ended
        cached = timings.get("cache_n")
        stats = CallStats(
            prompt_tokens=usage.get("prompt_tokens", prompt_tokens),
            cached_tokens=cached,
            evaluated_tokens=timings.get("prompt_n"),
            # llama-cpp-python streams one chunk per token and reports no usage when streaming.
            completion_tokens=usage.get("completion_tokens") or timings.get("predicted_n") or chunks,
            ttft_s=first_at - started,
            generation_s=ended - first_at,
        )
        return Completion(text="".join(parts), stats=stats, finish_reason=finish_reason)

    async def acomplete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
    ) -> Completion:
        call = functools.partial(
            self.complete, prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress
        )
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)

    def stats(self) -> dict[str, Any]:
        return {"model": self.name, "base_url": self.base_url, "n_ctx": self.n_ctx, "template": self.template.origin}

    def _template(self, template_from: Path | None, props: dict) -> ChatTemplate:
        if template_from is not None:
            return template_of_file(Path(template_from))
        if props.get("chat_template"):
            return ChatTemplate(
                props["chat_template"],
                bos_token=props.get("bos_token", ""),
                eos_token=props.get("eos_token", ""),
                origin=f"{self.base_url}/props",
            )
        raise InferenceError(
            f"{self.base_url} does not expose its chat template: pass template_from (the served GGUF file)"
        )

    def _props(self) -> dict:
        try:
            return self._request("GET", "/props")
        except EndpointError as e:
            if e.status in (404, 405):
                return {}
            raise

    def _find_tokenize_route(self) -> str:
        try:
            self._post("/extras/tokenize", {"input": ""})
            return "/extras/tokenize"
        except EndpointError as e:
            if e.status in (404, 405):
                return "/tokenize"
            raise

    def _post(self, route: str, body: dict) -> dict:
        return self._request("POST", route, body)

    def _request(self, method: str, route: str, body: dict | None = None) -> dict:
        with self._open(method, route, body) as response:
            try:
                return json.loads(response.read())
            except (OSError, ValueError) as e:
                raise EndpointError(f"{self.base_url}{route} sent no readable answer: {e}") from None

    def _stream(self, route: str, body: dict) -> Iterator[dict]:
        """The JSON events of a server-sent event stream, until `[DONE]` or the end of the body."""
        with self._open("POST", route, body) as response:
            try:
                for raw in response:
                    line = raw.decode("utf-8").strip()
                    if not line.startswith("data:"):
                        continue  # blank separators, comments and pings
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        return
                    event = json.loads(data)
                    if "error" in event:
                        raise EndpointError(f"{self.base_url}{route} failed: {event['error']}")
                    yield event
            except (OSError, ValueError) as e:
                raise EndpointError(f"{self.base_url}{route} broke off its answer: {e}") from None

    def _open(self, method: str, route: str, body: dict | None):
        url = self.base_url + route
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            return urllib.request.urlopen(request, timeout=self._timeout_s)
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", errors="replace")[:300]
            raise EndpointError(f"{url} answered {e.code}: {detail}", status=e.code) from None
        except (urllib.error.URLError, OSError) as e:
            raise EndpointError(f"{url} did not respond: {getattr(e, 'reason', e)}") from None


def template_of_file(path: Path) -> ChatTemplate:
    import llama_cpp
    from llama_cpp._internals import LlamaModel

    # The vocabulary and metadata only: no weights, no context.
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    try:
        model = LlamaModel(path_model=str(path), params=params, verbose=False)
    except ValueError as e:
        raise ModelFileError(f"model file {path} could not be read by llama.cpp: {e}") from e
    try:
        template = ChatTemplate.of_model(model, origin=f"model file {path}")
    finally:
        model.close()
    if template is None:
        raise _no_template(f"model file {path}")
    return template

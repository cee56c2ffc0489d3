"""llama.cpp in this process: the model's own template, grammar-constrained completions, prefix reuse."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from runtime.errors import AgentdError, InferenceError, ModelFileError
from runtime.inference.grammar import GBNF_CACHE_SIZE, schema_grammar
from runtime.inference.kv_cache import KvStateCache, capture, restore, state_size
from runtime.inference.model import (
    SEED,
    CallStats,
    Completion,
    Message,
    ProgressFn,
    Serialized,
    Throttled,
    abandonment,
    check_fits,
    throttled,
)
from runtime.inference.template import ChatTemplate, no_template

DEFAULT_KV_CACHE_BYTES = 768 * 2**20


def common_prefix_length(a: np.ndarray, b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != np.asarray(b[:n], dtype=a.dtype))
    return int(differ[0]) if differ.size else n


class LocalModel(Serialized):
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
            raise no_template(f"model file {self.path}")
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
            raise no_template(f"model file {self.path}")
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
        repeat_penalty: float = 1.0,
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
                return self._generate(tokens, grammar, max_tokens, started, throttled(progress), repeat_penalty)
            except AgentdError:
                raise
            except Exception as e:
                # What the context holds after a failed decode is unknown: the next call starts afresh.
                self._llama.reset()
                raise InferenceError(f"llama.cpp failed on {self.name}: {e}") from e

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

    def _evaluate(self, tokens: list[int], cached: int, report: Throttled) -> None:
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
        abandon = abandonment()
        for start in range(cached, total, llama.n_batch):
            if abandon is not None:
                # Between batches the context holds a prefix of the prompt, which the next call reuses.
                abandon.check()
            llama.eval(tokens[start : start + llama.n_batch])
            done = min(start + llama.n_batch, total)
            report("evaluating", done, total, last=done == total)

    def _generate(
        self,
        tokens: list[int],
        grammar,
        max_tokens: int,
        started: float,
        report: Throttled | None = None,
        repeat_penalty: float = 1.0,
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
        abandon = abandonment()
        stream = llama.generate(tokens, temp=0.0, repeat_penalty=repeat_penalty, grammar=grammar)
        with closing(stream):
            for token in stream:
                if abandon is not None:
                    abandon.check()
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


def load_model(path: Path, n_ctx: int | None = None) -> LocalModel:
    """Load the model; `n_ctx=None` uses the context length the model was trained with."""
    return LocalModel(path, n_ctx)

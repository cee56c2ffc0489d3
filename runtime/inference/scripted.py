"""A model whose replies are given: for tests and benchmarks of what code does with a reply.

Shipped with agentd, as structlog ships `structlog.testing`: a test of the loop's behaviour
(validation, approvals, recovery, notifications, skills) needs real prompts, counts and manifests,
not a model's judgement. On its own it renders ChatML, the template of the Qwen models agentd ships
with, and counts with a stand-in tokenizer, so nothing is loaded and every figure is deterministic.
Given a real model (`like=`) it renders and counts with that one instead; with `evaluate=True` the
real model also evaluates every prompt, so cache and timing figures are the real ones, and with
`generate=True` it generates its own reply under the schema too (then replaced by the script's).

    ScriptedModel([{"action": "final_answer", "answer": "March 3", "sources": []}])
    ScriptedModel(replies, like=LocalModel(path), evaluate=True)
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from typing import Any

import anyio

from runtime.errors import InferenceError
from runtime.inference.model import (
    CallStats,
    Completion,
    Message,
    Model,
    ProgressFn,
    Serialized,
    check_fits,
    throttled,
)

# Special tokens whole, then words, single punctuation marks and runs of white space: about as many
# pieces as a BPE tokenizer makes of English and JSON, which is all a count needs to be here.
_PIECES = re.compile(r"<\|[a-z_]+\|>|\w+|[^\w\s]|\s+")
# Qwen2.5's trained context: what a standalone script offers the loop unless told otherwise.
DEFAULT_N_CTX = 32768


class ScriptExhausted(InferenceError):
    """The code under test asked for more replies than the script holds."""


def chatml(messages: Sequence[Message]) -> str:
    """Messages as ChatML, with the assistant's turn opened: what Qwen's template renders."""
    turns = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def stand_in_tokens(text: str) -> list[int]:
    """A deterministic tokenization: one id per piece, the same piece always the same id."""
    return [zlib.crc32(piece.encode()) for piece in _PIECES.findall(text)]


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


class ScriptedModel(Serialized):
    """Hands out `replies` in order, one per completion, whatever the prompt; a dict reply is sent as
    its JSON. `prompts`, `schemas` and `penalties` keep what each call was asked, `replies` what is left.

    Its `CallStats` are what a model keeping each session's KV cache would report: the prefix shared
    with the session's previous prompt cached, the rest evaluated, no time spent. With `evaluate=True`
    they are the real model's. A prompt that does not fit `n_ctx` is refused as a real model refuses
    it, before a reply is used up.
    """

    def __init__(
        self,
        replies: Sequence[str | dict],
        *,
        like: Model | None = None,
        evaluate: bool = False,
        generate: bool = False,
        n_ctx: int | None = None,
        name: str = "scripted",
    ) -> None:
        if (evaluate or generate) and like is None:
            raise ValueError("evaluate=True and generate=True need a real model to run the prompts (like=)")
        self.replies = [r if isinstance(r, str) else json.dumps(r) for r in replies]
        self.like = like
        self.evaluate = evaluate or generate
        self.generate = generate
        self.name = name
        self.n_ctx = n_ctx or (like.n_ctx if like is not None else DEFAULT_N_CTX)
        self.prompts: list[str] = []
        self.schemas: list[dict | None] = []
        self.penalties: list[float] = []
        self._limiter = anyio.CapacityLimiter(1)
        self._last: dict[str | None, list[int]] = {}

    def render(self, messages: Sequence[Message]) -> str:
        return self.like.render(messages) if self.like is not None else chatml(messages)

    def tokenize(self, text: str) -> list[int]:
        return self.like.tokenize(text) if self.like is not None else stand_in_tokens(text)

    def count(self, text: str) -> int:
        return self.like.count(text) if self.like is not None else len(stand_in_tokens(text))

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
        if not self.replies:
            held = len(self.prompts)
            raise ScriptExhausted(
                f"the script ran out: call {held + 1} asked {self.name} for a reply, and the script held "
                f"{held} {'reply' if held == 1 else 'replies'}"
            )
        self.prompts.append(prompt)
        self.schemas.append(schema)
        self.penalties.append(repeat_penalty)
        text = self.replies.pop(0)
        if self.evaluate:
            assert self.like is not None
            # Generating one token evaluates the whole prompt; the real reply is generated only when asked
            # for, under the schema, since that is what costs the time.
            real = self.like.complete(
                prompt,
                schema=schema if self.generate else None,
                max_tokens=max_tokens if self.generate else 1,
                session=session,
                progress=progress,
                repeat_penalty=repeat_penalty,
            )
            return Completion(text, real.stats, "stop")
        cached = shared_prefix(self._last.get(session, []), tokens)
        self._last[session] = tokens
        out = self.count(text)
        report = throttled(progress)
        if report is not None:
            # What a real model reports, in one go: the prompt evaluated past its cached prefix, then the reply.
            report("evaluating", cached, len(tokens), last=cached == len(tokens))
            report("evaluating", len(tokens), len(tokens), last=True)
            report("generating", out, max_tokens, last=True)
        return Completion(text, CallStats(len(tokens), cached, len(tokens) - cached, out, 0.0, 0.0), "stop")

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.name,
            "n_ctx": self.n_ctx,
            "calls": len(self.prompts),
            "replies_left": len(self.replies),
        }
        if self.like is not None:
            out["like"] = self.like.stats()
        return out

"""The model protocol every decision goes through, and the values a completion comes back as."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

import anyio
import anyio.to_thread

from runtime import logs
from runtime.errors import ContextOverflow, InferenceError

# `progress(stage, done, total)`: "evaluating" with the prompt tokens in the KV cache so far of the prompt's
# tokens (the first report says how many were cached already), then "generating" with tokens generated of
# at most max_tokens. Called from the thread the model runs in.
ProgressFn = Callable[[str, int, int], None]
# Decoding is greedy, so the seed only matters to samplers agentd does not use; fixed all the same, so that
# a replay asks the model exactly what the original call asked.
SEED = 20251
# Progress reports are for people watching; more than about ten a second is noise that costs a redraw each.
PROGRESS_INTERVAL_S = 0.1

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


class Serialized:
    """`acomplete` for a model whose `complete` blocks: one call at a time, in a worker thread.

    One llama.cpp context cannot run two completions at once, and an HTTP endpoint serving one model
    does no better; callers queue on the limiter instead.
    """

    _limiter: anyio.CapacityLimiter

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
        # while the call still runs.
        call = functools.partial(
            self.complete, prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress
        )
        return await anyio.to_thread.run_sync(call, limiter=self._limiter)


def check_fits(prompt_tokens: int, max_tokens: int, n_ctx: int, name: str) -> None:
    if max_tokens < 1:
        raise InferenceError(f"max_tokens must be at least 1, not {max_tokens}")
    if prompt_tokens + max_tokens > n_ctx:
        raise ContextOverflow(
            f"the prompt ({prompt_tokens} tokens) plus up to {max_tokens} answer tokens needs "
            f"{prompt_tokens + max_tokens} tokens, more than the {n_ctx}-token context of {name}; "
            "nothing was evaluated"
        )


class Throttled:
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


def throttled(progress: ProgressFn | None) -> Throttled | None:
    return Throttled(progress) if progress is not None else None

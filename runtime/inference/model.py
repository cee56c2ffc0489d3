"""The model protocol every decision goes through, and the values a completion comes back as."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
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
# How long a cancelled caller waits for an abandoned call to stop. An HTTP call stops at once; llama.cpp
# at the end of the batch of the prompt it is evaluating: 512 tokens of the smoke model took 6-10 s on
# this 2-core machine while other work ran. Past the grace the caller goes on and the call stops later.
ABANDON_GRACE_S = 5.0

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
        repeat_penalty: float = 1.0,
    ) -> Completion: ...

    async def acomplete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
        repeat_penalty: float = 1.0,
    ) -> Completion: ...

    def stats(self) -> dict[str, Any]: ...


class CallAbandoned(InferenceError):
    """The caller gave up on the model call (agentd is stopping); nothing it produced is kept."""


class Abandonment:
    """Set when the caller of a model call gives up on it. The call stops at its next chance: an HTTP
    request at once (its socket is shut down by a hook), llama.cpp between two batches or tokens."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._hooks: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        return self._set

    def check(self) -> None:
        if self._set:
            raise CallAbandoned("the model call was abandoned: agentd is stopping")

    def on_set(self, hook: Callable[[], None]) -> None:
        """Run `hook` when the call is abandoned, or now if it already was."""
        with self._lock:
            if not self._set:
                self._hooks.append(hook)
                return
        hook()

    def set(self) -> None:
        with self._lock:
            self._set = True
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            try:
                hook()
            except OSError:
                pass  # the socket closed by itself meanwhile


# The running call's abandonment: set by `Serialized.acomplete`, seen by `complete` in its worker thread
# (anyio runs it in a copy of the caller's context). None for a call made directly.
_abandonment: ContextVar[Abandonment | None] = ContextVar("agentd_model_call", default=None)


def abandonment() -> Abandonment | None:
    """The running model call's abandonment, if its caller can give up on it."""
    return _abandonment.get()


class Serialized:
    """`acomplete` for a model whose `complete` blocks: one call at a time, in a worker thread.

    One llama.cpp context cannot run two completions at once, and an HTTP endpoint serving one model
    does no better; callers queue on the limiter instead. A cancelled caller (agentd stopping, Ctrl-C)
    abandons its call rather than waiting for it to end: the call is told to stop, and the caller waits
    at most ABANDON_GRACE_S for it before going on with its cancellation.
    """

    _limiter: anyio.CapacityLimiter
    # Whether an abandoned call stops at once, or only at its next chance (llama.cpp: the batch it evaluates).
    stops_at_once = False
    # Worker threads in a call of this model, abandoned ones that have not stopped yet included.
    _threads = 0
    _threads_lock = threading.Lock()

    @property
    def calling(self) -> bool:
        """Whether a call holds the model, or one its caller gave up on still runs."""
        return self._limiter.borrowed_tokens > 0 or self._threads > 0

    async def acomplete(
        self,
        prompt: str,
        *,
        schema: dict | None,
        max_tokens: int,
        session: str | None = None,
        progress: ProgressFn | None = None,
        repeat_penalty: float = 1.0,
    ) -> Completion:
        abandon = Abandonment()
        if progress is not None:
            watched = progress

            def progress(stage: str, done: int, total: int) -> None:
                # The decision an abandoned call was part of is over: nobody is watching its progress.
                if not abandon.is_set():
                    watched(stage, done, total)

        call = functools.partial(
            self.complete, prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress,
            repeat_penalty=repeat_penalty,
        )
        started, ended = threading.Event(), threading.Event()

        def run() -> Completion:
            with self._threads_lock:
                self._threads += 1
            started.set()
            try:
                abandon.check()  # given up on just as a worker thread picked it up
                return call()
            finally:
                ended.set()
                with self._threads_lock:
                    self._threads -= 1

        # The limiter is held here, not by the worker thread: a thread the caller gave up on keeps it
        # until it has stopped or the grace is over. LocalModel's own lock still keeps a second call off
        # the context when the grace runs out first.
        async with self._limiter:
            token = _abandonment.set(abandon)
            try:
                return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                abandon.set()
                # A call cancelled before a worker thread took it never runs at all.
                with anyio.CancelScope(shield=True), anyio.move_on_after(ABANDON_GRACE_S):
                    while started.is_set() and not ended.is_set():
                        await anyio.sleep(0.02)
                if started.is_set() and not ended.is_set():
                    log.warning("abandoned model call still running", grace_s=ABANDON_GRACE_S)
                raise
            finally:
                _abandonment.reset(token)


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

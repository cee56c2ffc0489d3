"""Progress: what a running decision is doing right now, for people to watch; never recorded.

The log says what happened; this says what is happening while a model call takes 30-300 s on a
small machine (evaluating a 2,400-token prompt, generating, a tool running). The agent loop reports
each stage to the `Runtime`'s `progress` callback; `agentd task run` draws it, `agentd serve` logs
one line per decision and the page shows the latest stage of each task.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Literal

Stage = Literal["deciding", "compacting", "noting", "evaluating", "generating", "running_tool", "decided"]


@dataclass(frozen=True)
class Progress:
    """One stage of one decision. `done` of `total` counts prompt tokens evaluated or tokens
    generated; `detail` names the tool running, or is the outcome line once decided."""

    task_id: str
    step: int
    stage: Stage
    done: int = 0
    total: int = 0
    detail: str = ""


Reporter = Callable[[Progress], None]


def ignore(_: Progress) -> None:
    """The reporter when nobody watches."""


def describe(p: Progress) -> str:
    """What the stage is doing, in the words the CLI, the log and the page all use."""
    if p.stage == "evaluating":
        return f"evaluating {p.done:,} of {p.total:,} prompt tokens"
    if p.stage == "generating":
        return f"generating {p.done:,} of at most {p.total:,} tokens"
    if p.stage == "running_tool":
        return f"running {p.detail}"
    if p.stage == "decided":
        return p.detail or "decided"
    if p.stage == "compacting":
        return "summarizing older steps (compaction)"
    if p.stage == "noting":
        return f"taking a note of message {p.done}"
    return p.stage


def line(p: Progress) -> str:
    return f"step {p.step}: {describe(p)}"


class Board:
    """The latest stage of each task that is taking a decision, for the page; a `Reporter`.

    Reports come from the event loop and from the thread the model runs in, hence the lock. A task
    leaves the board when its decision ends (`decided`) or when its runner stops (`clear`).
    `version` moves with every change, so a reader polls it instead of comparing boards.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, Progress] = {}
        self.version = 0

    def __call__(self, p: Progress) -> None:
        with self._lock:
            if p.stage == "decided":
                self._latest.pop(p.task_id, None)
            else:
                self._latest[p.task_id] = p
            self.version += 1

    def clear(self, task_id: str) -> None:
        with self._lock:
            if self._latest.pop(task_id, None) is not None:
                self.version += 1

    def get(self, task_id: str) -> Progress | None:
        with self._lock:
            return self._latest.get(task_id)

    def snapshot(self) -> tuple[int, dict[str, Progress]]:
        with self._lock:
            return self.version, dict(self._latest)


@dataclass(frozen=True)
class Decided:
    """One decision as its reports told it, from `deciding` to `decided`."""

    task_id: str
    step: int
    outcome: str
    prompt_tokens: int  # of the last attempt's prompt
    evaluated_tokens: int  # over all its attempts: not found in the KV cache
    seconds: float


class Tally:
    """Adds up each task's reports into a `Decided` when its decision ends; thread-safe like `Board`.

    Prompt figures come from the `evaluating` reports: the first of each attempt says what was cached
    (an HTTP endpoint does not say, so there it counts the whole prompt as evaluated).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}

    def __call__(self, p: Progress) -> Decided | None:
        with self._lock:
            now = self._clock()
            if p.stage == "deciding":
                self._open[p.task_id] = _Open(p.step, now)
                return None
            d = self._open.get(p.task_id)
            if d is None:
                d = self._open[p.task_id] = _Open(p.step, now)
            if p.stage == "evaluating" and d.stage != "evaluating":
                d.prompt, d.evaluated = p.total, d.evaluated + p.total - p.done
            d.stage = p.stage
            if p.stage != "decided":
                return None
            del self._open[p.task_id]
            return Decided(p.task_id, p.step, p.detail, d.prompt, d.evaluated, now - d.started)


@dataclass
class _Open:
    step: int
    started: float
    stage: str = "deciding"
    prompt: int = 0
    evaluated: int = 0

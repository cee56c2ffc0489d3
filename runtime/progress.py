"""Progress: what a running decision is doing right now, for people to watch; never recorded.

The log says what happened; this says what is happening while a model call takes 30-300 s on a
small machine (evaluating a 2,400-token prompt, generating, a tool running). The agent loop reports
each stage to the `Runtime`'s `progress` callback; `agentd task run` draws it, `agentd serve` logs
one line per decision and the page shows the latest stage of each task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

Stage = Literal["deciding", "evaluating", "generating", "running_tool", "decided"]


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

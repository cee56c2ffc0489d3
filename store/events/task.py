"""Events in the life of a task: submitted, moving between phases."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from store.events._base import Event


class TaskPhase(StrEnum):
    SUBMITTED = "submitted"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (TaskPhase.COMPLETED, TaskPhase.FAILED, TaskPhase.CANCELLED)


class TaskSubmitted(Event):
    goal: str = Field(min_length=1)
    workspace: str
    tenant: str = "default"
    profile: str = "workspace"
    # Tools with other effects than these are not offered to the task at all (seed 000: no capability
    # with side effects by default). Approval still applies to the ones that are.
    allowed_effects: tuple[Literal["read", "write", "external"], ...] = ("read",)
    max_steps: int = Field(40, ge=1)
    max_tokens: int = Field(200_000, ge=1)
    # What the authenticated caller's side knows about them (an account id, a plan): trusted request
    # context, shown to the model as task state, never taken from the model or from the goal's text.
    context: dict[str, str] = {}
    # Which of the task's history each request shows (runtime.agent.policy); tasks recorded before
    # there was a choice read as the default, which shows the whole history while it fits.
    policy: str = "auto"


class TaskPhaseChanged(Event):
    phase: TaskPhase
    reason: str = ""


class RunInterrupted(Event):
    """agentd stopped while the task was in the middle of a decision; the next start takes it again."""

    reason: str

"""Events in the life of a task: submitted, moving between phases."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

from pydantic import Field

from store.events._base import Event

# What a task may be allowed to do: runtime.tools.Effect's names. Reading it always may; the rest are
# granted (`task submit --allow`, a schedule, the API, an eval case).
EffectName = Literal["read", "write", "external", "memory"]
Granted = Literal["write", "external", "memory"]
EFFECTS: tuple[str, ...] = get_args(EffectName)

# The largest integer a database column holds (signed 64 bits, SQLite's and PostgreSQL's bigint): a
# larger budget would overflow in the driver when the task's row is written.
INTEGER_MAX = 2**63 - 1


class TaskPhase(StrEnum):
    SUBMITTED = "submitted"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    # A conversation that has answered and waits for the person's next message (or `task close`).
    WAITING_FOR_USER = "waiting_for_user"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (TaskPhase.COMPLETED, TaskPhase.FAILED, TaskPhase.CANCELLED)


# Reasons code reads back: an answered task may be followed up; a closed conversation may not.
ANSWERED = "answered"
CLOSED = "closed by the user"


class TaskSubmitted(Event):
    goal: str = Field(min_length=1)
    workspace: str
    tenant: str = "default"
    profile: str = "workspace"
    # Tools with other effects than these are not offered to the task at all (seed 000: no capability
    # with side effects by default). Approval still applies to the ones that are.
    allowed_effects: tuple[EffectName, ...] = ("read",)
    max_steps: int = Field(40, ge=1, le=INTEGER_MAX)
    max_tokens: int = Field(200_000, ge=1, le=INTEGER_MAX)
    # What the authenticated caller's side knows about them (an account id, a plan): trusted request
    # context, shown to the model as task state, never taken from the model or from the goal's text.
    context: dict[str, str] = {}
    # Which of the task's history each request shows (runtime.agent.policy); tasks recorded before
    # there was a choice read as the default, which shows the whole history while it fits.
    policy: str = "auto"
    # A conversation: after each answer the task waits for the person instead of ending.
    conversation: bool = False
    # A sub-task (`delegate`): the task that handed it its question, and the only tools it is offered.
    parent: str | None = None
    tools: tuple[str, ...] | None = None
    # Every change to a file waits for a person, who is shown its diff first (`--confirm-changes`).
    confirm_changes: bool = False


class TaskPhaseChanged(Event):
    phase: TaskPhase
    reason: str = ""


class UserSaid(Event):
    """The authenticated user's own message to the task: a turn of theirs, as trusted as the goal.

    It is the user's instruction, never a harness notice, and, like the goal, it grants nothing: what
    the user pastes into it is shown as data, and rights are checked in code.
    """

    text: str = Field(min_length=1)


class RunInterrupted(Event):
    """agentd stopped while the task was in the middle of a decision; the next start takes it again."""

    reason: str

"""Task commands as pure decisions: given the task's state, which events (if any) record the command."""

from __future__ import annotations

from pathlib import Path

from runtime.agent import policy as policy_
from runtime.errors import InvalidCommand
from store.events import Event, TaskPhase, TaskPhaseChanged, TaskSubmitted
from store.state import TaskState


def submit_task(
    goal: str,
    workspace: Path,
    *,
    tenant: str = "default",
    profile: str = "workspace",
    allowed_effects: tuple[str, ...] = ("read",),
    max_steps: int | None = None,
    max_tokens: int | None = None,
    context: dict[str, str] | None = None,
    policy: str = policy_.DEFAULT,
) -> list[Event]:
    goal = goal.strip()
    if not goal:
        raise InvalidCommand("a task needs a goal: say what the agent should do")
    if not workspace.is_dir():
        raise InvalidCommand(f"workspace {workspace} is not a folder")
    limits = {k: v for k, v in (("max_steps", max_steps), ("max_tokens", max_tokens)) if v is not None}
    effects = tuple(sorted(set(allowed_effects) | {"read"}))
    policy = str(policy_.parse(policy))
    return [
        TaskSubmitted(
            goal=goal, workspace=str(workspace.resolve()), tenant=tenant, profile=profile,
            allowed_effects=effects, context=dict(sorted((context or {}).items())), policy=policy, **limits,
        )
    ]


def cancel_task(state: TaskState, reason: str = "cancelled by the operator") -> list[Event]:
    if state.phase.finished:
        raise InvalidCommand(f"task {state.task_id} is already {state.phase.value}")
    return [TaskPhaseChanged(phase=TaskPhase.CANCELLED, reason=reason)]

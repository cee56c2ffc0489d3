"""Task commands as pure decisions: given the task's state, which events (if any) record the command."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.agent import policy as policy_
from runtime.errors import InvalidCommand, NotFound
from store.errors import ConcurrencyConflict
from store.events import ANSWERED, CLOSED, Event, Recorded, TaskPhase, TaskPhaseChanged, TaskSubmitted, UserSaid
from store.state import TaskState

if TYPE_CHECKING:
    from runtime.agent.profiles import Profile
    from runtime.secrets import Secrets
    from store import EventStore


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
    conversation: bool = False,
    confirm_changes: bool = False,
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
            allowed_effects=effects, context=dict(sorted((context or {}).items())), policy=policy,
            conversation=conversation, confirm_changes=confirm_changes, **limits,
        )
    ]


def submit(
    store: Callable[[], EventStore],
    goal: str,
    workspace: Path,
    *,
    profiles: Mapping[str, Profile],
    default_policy: str,
    profile: str = "workspace",
    allowed: Sequence[str] = (),
    policy: str | None = None,
    actor: str,
    secrets: Secrets | None = None,
    **options: Any,
) -> tuple[str, int]:
    """Submit a task as the CLI and the HTTP API do: a profile that is loaded, its own context policy
    unless one is given, `read` always allowed. Returns the new task's id and its first event's seq.
    `store` is asked for only once the task is valid: a refused submit makes no database. A secret in
    the goal goes into the new task's vault, and the goal is recorded with its placeholder."""
    from store import NO_STREAM
    from store.ids import new_task_id

    if profile not in profiles:
        raise InvalidCommand(f"no profile {profile!r}; loaded profiles: {', '.join(sorted(profiles))}")
    events = submit_task(
        goal, workspace, profile=profile, allowed_effects=("read", *allowed),
        policy=policy or profiles[profile].context_policy or default_policy, **options,
    )
    task_id = new_task_id()
    if secrets is not None:
        events = secrets.vault(store(), task_id).hide_events(events)
    records = store().append(task_id, events, expected_version=NO_STREAM, actor=actor)
    return task_id, records[-1].seq


def cancel_task(state: TaskState, reason: str = "cancelled by the operator") -> list[Event]:
    if state.phase.finished:
        raise InvalidCommand(f"task {state.task_id} is already {state.phase.value}")
    return [TaskPhaseChanged(phase=TaskPhase.CANCELLED, reason=reason)]

# While a task runs (or waits to start, or for an approval) a message is taken in at its next request.
_TAKES_MESSAGES = frozenset({TaskPhase.SUBMITTED, TaskPhase.RUNNING, TaskPhase.AWAITING_APPROVAL})


def say(records: Sequence[Recorded], text: str) -> list[Event]:
    """A message from the user to a task: taken in at the next request of one that runs; one that has
    answered (a conversation waiting for the user, or a task completed by its answer) goes on from its
    transcript, like a follow-up in a chat."""
    text = text.strip()
    if not text:
        raise InvalidCommand("a message needs text: say what the task should know or do")
    task_id, phase, reason = _phase(records)
    if phase in _TAKES_MESSAGES:
        return [UserSaid(text=text)]
    if phase is TaskPhase.WAITING_FOR_USER or (phase is TaskPhase.COMPLETED and reason == ANSWERED):
        return [UserSaid(text=text), TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="the user said more")]
    raise InvalidCommand(
        f"task {task_id} is {phase.value} ({reason or 'no reason recorded'}); a message can only go to a task "
        "that runs, waits for the user or has answered"
    )


def close_task(records: Sequence[Recorded]) -> list[Event]:
    """End a conversation that waits for the user; its last answer stands."""
    task_id, phase, _ = _phase(records)
    if phase is TaskPhase.WAITING_FOR_USER:
        return [TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason=CLOSED)]
    if phase.finished:
        raise InvalidCommand(f"task {task_id} is already {phase.value}")
    raise InvalidCommand(
        f"task {task_id} is {phase.value}, not waiting for the user; `agentd task cancel {task_id}` stops it"
    )


# A command decided on a task that runs may meet an append of the task's own in between: decided again
# on the newer state, a few times, rather than written over it.
TRIES = 5


def append_decided(
    store: EventStore,
    task_id: str,
    decide: Callable[[list[Recorded]], list[Event]],
    actor: str,
    secrets: Secrets | None = None,
) -> list[Recorded]:
    """Decide a command (`say`, `close_task`) on the task's stream as it is, and append what it says,
    a secret in a message kept in the task's vault and recorded as its placeholder."""
    vault = None if secrets is None else secrets.vault(store, task_id)
    for attempt in range(TRIES):
        records = store.read_stream(task_id)
        if not records:
            raise NotFound(f"no task {task_id!r}")
        events = decide(records)
        if vault is not None:
            events = vault.hide_events(events)
        try:
            return store.append(task_id, events, expected_version=records[-1].stream_version, actor=actor)
        except ConcurrencyConflict:
            if attempt == TRIES - 1:
                raise
    raise AssertionError("unreachable")


def _phase(records: Sequence[Recorded]) -> tuple[str, TaskPhase, str]:
    """The task's id, phase and the reason recorded with it."""
    phase, reason = TaskPhase.SUBMITTED, ""
    for rec in records:
        if isinstance(rec.event, TaskPhaseChanged):
            phase, reason = rec.event.phase, rec.event.reason
    return records[0].stream_id, phase, reason

"""What the loop does next, decided purely: from the task's view to the events to append and the one
side effect to perform.

The loop (runtime.agent.loop) does the I/O: it appends what a `Decision` says, then runs its tool or
takes in its skill. The rerun of a recorded task asks the same functions what each accepted proposal
comes to and compares that with what was recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from runtime.agent import claims, proposal
from runtime.agent.view import TaskView
from runtime.canonical import canonical_json
from runtime.skills import activation
from runtime.tools import ToolContract
from runtime.tools.executor import ToolOutcome
from store.events import (
    ANSWERED,
    AnswerGiven,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    Event,
    TaskEscalated,
    TaskPhase,
    TaskPhaseChanged,
    ToolCallProposed,
)


@dataclass(frozen=True)
class RunTool:
    """Run the proposed call now (recording its start first); `approved` says a person or skill let it."""

    proposed: ToolCallProposed
    approved: bool


@dataclass(frozen=True)
class TakeInSkill:
    """Read the skill's body from its folder and record it, as taken in at step `call_index`."""

    name: str
    call_index: int


Effect = RunTool | TakeInSkill


@dataclass(frozen=True)
class Confirm:
    """A change a person must see and approve before it is made: its diff, and the hash each file must
    still have when the call runs (None: no file); no files bound for a call that cannot be previewed."""

    preview: str
    bound: dict[str, str | None]


@dataclass(frozen=True)
class Decision:
    events: tuple[Event, ...] = ()
    effect: Effect | None = None
    # After the events, the task waits for a person: no further step until something changes.
    waits: bool = False


@dataclass(frozen=True)
class Policy:
    """What a decision needs to know beyond the log: the clock, the approval rules, new ids."""

    now: datetime
    approval_ttl: timedelta
    policy_version: str
    new_approval_id: Callable[[], str]


def arguments_hash(arguments: dict) -> str:
    """An approval is for exactly these arguments; any change is a different request."""
    return hashlib.sha256(canonical_json(arguments).encode()).hexdigest()


def settle(view: TaskView, policy: Policy) -> Decision | None:
    """Before any new decision: a call a crash left without a result, or a call whose approval has
    been decided (or has expired). None when there is neither, or nothing to do until a person acts
    (then `waits`)."""
    return _recover_unknown_outcome(view, policy) or _settle_approval(view, policy)


def _recover_unknown_outcome(view: TaskView, policy: Policy) -> Decision | None:
    """A tool call that started and has no result: agentd stopped while it ran, so nobody knows
    whether it took effect. An idempotent tool simply runs again; any other waits for a person,
    who approves running it again or denies it, and is never repeated silently."""
    found = view.unfinished
    if found is None:
        return None
    proposed = found.proposed
    if found.started.idempotent:
        return Decision(effect=RunTool(proposed, approved=True))
    if found.rerun is None:
        return Decision(
            events=(
                ApprovalRequested(
                    approval_id=policy.new_approval_id(),
                    call_id=proposed.call_id,
                    tool=proposed.tool,
                    arguments_hash=arguments_hash(proposed.arguments),
                    reason=f"outcome unknown: agentd stopped while {proposed.tool} ran; run it again?",
                    expires_at=(policy.now + policy.approval_ttl).isoformat(),
                    policy_version=policy.policy_version,
                ),
                TaskPhaseChanged(
                    phase=TaskPhase.AWAITING_APPROVAL, reason=f"outcome of {proposed.tool} unknown after a stop"
                ),
            ),
            waits=True,
        )
    if found.decision is None:
        return Decision(waits=True)
    if isinstance(found.decision, ApprovalGranted):
        return Decision(
            events=(TaskPhaseChanged(phase=TaskPhase.RUNNING, reason=f"rerun approved by {found.decision.by}"),),
            effect=RunTool(proposed, approved=True),
        )
    return Decision(events=(
        TaskPhaseChanged(phase=TaskPhase.RUNNING, reason=f"rerun of {proposed.tool} denied"),
        _unrun(proposed, "outcome_unknown", f"{proposed.tool} may or may not have taken effect before agentd "
               "stopped; a person chose not to run it again"),
    ))


def _settle_approval(view: TaskView, policy: Policy) -> Decision | None:
    """A proposed tool call that waits on an approval: act on the decision, or on its expiry."""
    pending = view.awaiting_approval
    if pending is None:
        return None
    proposed, request, decision = pending.proposed, pending.request, pending.decision
    expired: tuple[Event, ...] = ()
    if decision is None:
        if not (request.expires_at and datetime.fromisoformat(request.expires_at) <= policy.now):
            return None
        # Nobody answered in time: the default is no.
        decision = ApprovalDenied(approval_id=request.approval_id, by="agentd", reason="expired")
        expired = (decision,)
    if isinstance(decision, ApprovalGranted) and arguments_hash(proposed.arguments) == request.arguments_hash:
        return Decision(
            events=(*expired, TaskPhaseChanged(phase=TaskPhase.RUNNING, reason=f"approved by {decision.by}")),
            effect=RunTool(proposed, approved=True),
        )
    reason = decision.reason if isinstance(decision, ApprovalDenied) else "arguments changed after approval"
    return Decision(events=(
        *expired,
        TaskPhaseChanged(phase=TaskPhase.RUNNING, reason=f"{proposed.tool} denied"),
        _unrun(proposed, "denied", reason or "denied by a person"),
    ))


def act(
    view: TaskView,
    call_index: int,
    action: proposal.Action,
    contract: ToolContract | None,
    policy: Policy,
    unrecorded: str | None = None,
    confirm: Confirm | None = None,
    screened: ToolOutcome | None = None,
) -> Decision:
    """Step 7's second half: what an accepted proposal comes to. `contract` is the called tool's;
    `unrecorded` says why what the call may change cannot be recorded, and `confirm` shows the change
    a task that confirms its changes would make: only a person may accept either (no skill's
    pre-approval covers them). `screened` is the refusal of a call its checks refuse: it is refused
    then and there, never put to a person."""
    if isinstance(action, proposal.FinalAnswer):
        # A conversation's answer is a turn: the task then waits for the person's next message.
        after = TaskPhase.WAITING_FOR_USER if view.submitted.event.conversation else TaskPhase.COMPLETED
        return Decision(events=(
            AnswerGiven(answer=action.answer, sources=tuple(dict.fromkeys(action.sources))),
            TaskPhaseChanged(phase=after, reason=ANSWERED),
        ))
    if isinstance(action, proposal.Escalate):
        return Decision(events=(
            TaskEscalated(reason=action.reason),
            TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason=f"escalated: {action.reason}"),
        ))
    if isinstance(action, proposal.ActivateSkill):
        return Decision(effect=TakeInSkill(action.skill, call_index))
    assert isinstance(action, proposal.CallTool) and contract is not None
    call_id = f"c{call_index}"
    proposed = ToolCallProposed(call_id=call_id, tool=action.tool, arguments=action.arguments, reason=action.why)
    if screened is not None:
        return Decision(events=(proposed, screened.executed(call_id)))
    if not contract.needs_approval and unrecorded is None and confirm is None:
        return Decision(events=(proposed,), effect=RunTool(proposed, approved=False))
    skill = activation.pre_approver(view.active, action.tool) if unrecorded is None and confirm is None else None
    if skill is not None:
        # The skill's allowed-tools approved it in advance; the log says who did, like any approval.
        approval_id = policy.new_approval_id()
        return Decision(
            events=(
                proposed,
                ApprovalRequested(
                    approval_id=approval_id,
                    call_id=call_id,
                    tool=action.tool,
                    arguments_hash=arguments_hash(action.arguments),
                    reason=action.why,
                    policy_version=policy.policy_version,
                ),
                ApprovalGranted(approval_id=approval_id, by=f"skill:{skill}"),
            ),
            effect=RunTool(proposed, approved=True),
        )
    return Decision(
        events=(
            proposed,
            ApprovalRequested(
                approval_id=policy.new_approval_id(),
                call_id=call_id,
                tool=action.tool,
                arguments_hash=arguments_hash(action.arguments),
                reason=action.why if unrecorded is None else f"{action.why} ({unrecorded})",
                expires_at=(policy.now + policy.approval_ttl).isoformat(),
                policy_version=policy.policy_version,
                unrecorded=unrecorded,
                preview=None if confirm is None else confirm.preview,
                bound={} if confirm is None else dict(confirm.bound),
            ),
            TaskPhaseChanged(
                phase=TaskPhase.AWAITING_APPROVAL,
                reason=f"{action.tool} would run unrecorded" if unrecorded is not None
                else f"{action.tool}'s change waits to be confirmed" if confirm is not None
                else f"{action.tool} needs approval",
            ),
        ),
        waits=True,
    )


def hand_over(view: TaskView) -> Decision | None:
    """What a task comes to when no reply of the model's could be accepted, down to the last try with
    only an answer to give: where a call was refused, denied or failed since the user's latest message,
    the task goes to a person with what its log shows (each such call, and what changed or that nothing
    did), as an escalation written by agentd, not the model; None otherwise, and the task fails.

    A blocked request is a task a person can take over, not a fault. Seen on the default model, after
    write_file refused a path outside the workspace or a person denied a shell command: every reply
    handed back the request or a refusal, and the task failed with "no answer was given" although the
    log says exactly what happened."""
    done = claims.effects(view.records)
    if not done.failed:
        return None
    outcome = [f"changed {', '.join(done.changed)}"] if done.changed else []
    outcome += [f"ran {', '.join(dict.fromkeys(done.acted))}"] if done.acted else []
    reason = (
        f"agentd handed the task over, the model gave no answer that could be accepted; "
        f"{'; '.join(done.failed[-3:])}; {', '.join(outcome) or claims.UNBACKED}"
    )
    return Decision(events=(
        TaskEscalated(reason=reason),
        TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason=f"escalated: {reason}"),
    ))


def _unrun(proposed: ToolCallProposed, status: str, message: str):
    """The result of a call that was never run (denied, or not run again after a stop)."""
    outcome = ToolOutcome(
        tool=proposed.tool, status=status, observation={"error": status, "message": message}, attempts=1
    )
    return outcome.executed(proposed.call_id)

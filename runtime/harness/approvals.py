"""Deciding an approval: pure checks of the approval's state and the clock, and the one way to record it.

The CLI and the web page both decide through `decide`, so both refuse the same things the same way
(already decided, expired, arguments that are not the ones shown) and both tell the task through
the notification queue.
"""

from __future__ import annotations

from datetime import UTC, datetime

from notifications import queue
from runtime.errors import InvalidCommand, NotFound
from store import EventStore
from store.errors import StoreError
from store.events import ApprovalDenied, ApprovalGranted, ApprovalRequested, Event, ToolCallProposed
from store.state import Approval


def approve(approval: Approval, *, by: str, now: datetime) -> list[Event]:
    check_open(approval, now)
    return [ApprovalGranted(approval_id=approval.approval_id, by=by)]


def deny(approval: Approval, *, by: str, reason: str, now: datetime) -> list[Event]:
    check_open(approval, now)
    return [ApprovalDenied(approval_id=approval.approval_id, by=by, reason=reason)]


def check_open(approval: Approval, now: datetime) -> None:
    if approval.status != "pending":
        who = f" by {approval.decided_by}" if approval.decided_by else ""
        raise InvalidCommand(f"approval {approval.approval_id} was already {approval.status}{who}")
    if approval.expires_at and datetime.fromisoformat(approval.expires_at) <= now:
        raise InvalidCommand(
            f"approval {approval.approval_id} expired at {approval.expires_at}; the task treats it as denied"
        )


def decide(
    store: EventStore,
    approval_id: str,
    *,
    grant: bool,
    by: str,
    reason: str = "",
    arguments_hash: str | None = None,
    now: datetime | None = None,
) -> tuple[str, Approval]:
    """Record one person's decision and tell the task; returns the task id and the decided approval.

    `arguments_hash` is the hash of the arguments the person was shown: a decision on anything else is
    refused. Two people deciding at once produce one decision: the projection refuses the second
    append, and the loser is told who decided first.
    """
    found = store.approval(approval_id)
    if found is None:
        raise NotFound(f"no approval {approval_id!r}")
    task_id, approval = found
    now = now or datetime.now(UTC)
    if arguments_hash is not None and arguments_hash != approval.arguments_hash:
        raise InvalidCommand(
            f"approval {approval_id} is for other arguments than the ones shown; reload and decide again"
        )
    events = approve(approval, by=by, now=now) if grant else deny(approval, by=by, reason=reason, now=now)
    try:
        store.append(task_id, events, actor=by)
    except StoreError:
        # Someone decided between our read and our append; the projection refused the second decision.
        _, decided_first = store.approval(approval_id)
        check_open(decided_first, now)  # raises, naming who decided first
        raise
    decided = "granted" if grant else "denied"
    queue.enqueue(store, queue.new_notification(
        source="approval", kind=f"approval_{decided}", tasks=[task_id],
        text=f"approval {approval_id} for {approval.tool} was {decided} by {by}"
        + (f": {reason}" if reason and not grant else ""),
        payload={"approval_id": approval_id, "decision": decided},
    ), actor=by)
    return store.approval(approval_id)


def rows(store: EventStore, status: str | None = "pending") -> list[dict]:
    """Approvals (pending ones by default, every one with None) as `agentd approvals list --json` and the
    HTTP API give them: the approval, its task, the exact arguments of the call and the change it would make."""
    out = []
    for task_id, a in store.approvals(status):
        arguments: dict = {}
        preview = None
        for rec in store.read_stream(task_id):
            if isinstance(rec.event, ToolCallProposed) and rec.event.call_id == a.call_id:
                arguments = rec.event.arguments
            elif isinstance(rec.event, ApprovalRequested) and rec.event.approval_id == a.approval_id:
                preview = rec.event.preview
        out.append({"task_id": task_id, **a._asdict(), "arguments": arguments, "preview": preview})
    return out

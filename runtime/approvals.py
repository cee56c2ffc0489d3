"""Deciding an approval, as a pure function of the approval's state and the clock."""

from __future__ import annotations

from datetime import datetime

from store.errors import InvalidCommand
from store.events import ApprovalDenied, ApprovalGranted, Event
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

"""Events of a human decision on a risky action."""

from __future__ import annotations

from store.events._base import Event


class ApprovalRequested(Event):
    approval_id: str
    call_id: str
    tool: str
    arguments_hash: str
    reason: str = ""
    expires_at: str | None = None
    # The version of the profile (policy, tools) the request was made under; None in older logs.
    policy_version: str | None = None
    # Why what the call changes cannot be recorded (a workspace past the bound): granted, it runs unrecorded.
    unrecorded: str | None = None
    # For a task that confirms its changes: the diff the call would make, and each file's hash as it was
    # previewed (None: no file), which it must still have when the call runs.
    preview: str | None = None
    bound: dict[str, str | None] = {}


class ApprovalGranted(Event):
    approval_id: str
    by: str


class ApprovalDenied(Event):
    approval_id: str
    by: str
    reason: str = ""

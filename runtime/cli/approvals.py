"""`agentd approvals`: list the actions waiting for a person, and approve or deny them."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime

import click

from runtime import approvals as deciding
from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json, table
from store.errors import NotFound, StoreError
from notifications import queue
from store.events import ApprovalGranted, ToolCallProposed


@click.group()
def approvals() -> None:
    """List, approve and deny actions that wait for a person."""


@approvals.command("list")
@click.option("--all", "show_all", is_flag=True, help="Decided approvals too, not only pending ones.")
@json_option
@pass_app
def list_(app: App, show_all: bool, as_json: bool) -> None:
    """Pending approvals with the exact arguments of the call they would allow."""
    store = app.store()
    rows = []
    for task_id, a in store.approvals(None if show_all else "pending"):
        arguments = _arguments(store, task_id, a.call_id)
        rows.append({"task_id": task_id, **a._asdict(), "arguments": arguments})
    if as_json:
        echo_json(rows)
        return
    click.echo(
        table(
            [(r["approval_id"], r["task_id"], r["tool"], r["status"], r["expires_at"], r["arguments"]) for r in rows],
            ["ID", "TASK", "TOOL", "STATUS", "EXPIRES (UTC)", "ARGUMENTS"],
        )
    )


def _arguments(store, task_id: str, call_id: str) -> dict:
    for rec in store.read_stream(task_id):
        if isinstance(rec.event, ToolCallProposed) and rec.event.call_id == call_id:
            return rec.event.arguments
    return {}


@approvals.command()
@click.argument("approval_id")
@click.option("--by", default=None, help="Who decides (default: your user name).")
@pass_app
def approve(app: App, approval_id: str, by: str | None) -> None:
    """Allow the call, with exactly the arguments it was requested with."""
    _decide(app, approval_id, lambda a, now, who: deciding.approve(a, by=who, now=now), by)
    click.echo(f"{approval_id} approved")


@approvals.command()
@click.argument("approval_id")
@click.option("--reason", default="", help="Passed to the agent.")
@click.option("--by", default=None, help="Who decides (default: your user name).")
@pass_app
def deny(app: App, approval_id: str, reason: str, by: str | None) -> None:
    """Refuse the call; the agent hears the reason."""
    _decide(app, approval_id, lambda a, now, who: deciding.deny(a, by=who, reason=reason, now=now), by)
    click.echo(f"{approval_id} denied")


def _decide(app: App, approval_id: str, decide, by: str | None) -> None:
    store = app.store()
    found = store.approval(approval_id)
    if found is None:
        raise NotFound(f"no approval {approval_id!r}")
    task_id, approval = found
    who = by or getpass.getuser()
    events = decide(approval, datetime.now(UTC), who)
    try:
        store.append(task_id, events, actor=who)
        decided = "granted" if isinstance(events[0], ApprovalGranted) else "denied"
        queue.enqueue(store, queue.new_notification(
            source="approval", kind=f"approval_{decided}", tasks=[task_id],
            text=f"approval {approval_id} for {approval.tool} was {decided} by {who}",
            payload={"approval_id": approval_id, "decision": decided},
        ), actor=who)
    except StoreError:
        # Someone decided between our read and our append; the projection refused the second decision.
        _, now_decided = store.approval(approval_id)
        deciding.check_open(now_decided, datetime.now(UTC))  # raises, naming who decided first
        raise

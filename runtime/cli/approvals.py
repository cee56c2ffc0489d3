"""`agentd approvals`: list the actions waiting for a person, and approve or deny them."""

from __future__ import annotations

import getpass

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.harness import approvals as deciding
from runtime.output import echo_json, table


@click.group()
def approvals() -> None:
    """List, approve and deny actions that wait for a person."""


@approvals.command("list")
@click.option("--all", "show_all", is_flag=True, help="Decided approvals too, not only pending ones.")
@json_option
@pass_app
def list_(app: App, show_all: bool, as_json: bool) -> None:
    """Pending approvals with the exact arguments of the call they would allow."""
    rows = deciding.rows(app.store(), None if show_all else "pending")
    if as_json:
        echo_json(rows)
        return
    click.echo(
        table(
            [(r["approval_id"], r["task_id"], r["tool"], r["status"], r["expires_at"], r["arguments"]) for r in rows],
            ["ID", "TASK", "TOOL", "STATUS", "EXPIRES (UTC)", "ARGUMENTS"],
        )
    )
    for r in rows:
        if r["preview"]:
            # A task that confirms its changes: the person approves this diff, on these bytes.
            click.echo(f"\n{r['approval_id']} would change:\n{r['preview'].rstrip()}")


@approvals.command()
@click.argument("approval_id")
@click.option("--by", default=None, help="Who decides (default: your user name).")
@pass_app
def approve(app: App, approval_id: str, by: str | None) -> None:
    """Allow the call, with exactly the arguments it was requested with."""
    _decide(app, approval_id, grant=True, by=by)
    click.echo(f"{approval_id} approved")


@approvals.command()
@click.argument("approval_id")
@click.option("--reason", default="", help="Passed to the agent.")
@click.option("--by", default=None, help="Who decides (default: your user name).")
@pass_app
def deny(app: App, approval_id: str, reason: str, by: str | None) -> None:
    """Refuse the call; the agent hears the reason."""
    _decide(app, approval_id, grant=False, by=by, reason=reason)
    click.echo(f"{approval_id} denied")


def _decide(app: App, approval_id: str, *, grant: bool, by: str | None, reason: str = "") -> None:
    deciding.decide(app.store(), approval_id, grant=grant, by=by or getpass.getuser(), reason=reason)

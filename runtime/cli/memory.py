"""`agentd memory`: what agentd remembers about a subject in a tenant, added, listed and forgotten by hand."""

from __future__ import annotations

import getpass

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json, table


@click.group()
def memory() -> None:
    """What agentd remembers of a subject in a tenant: add, list, forget.

    A memory's text is redacted (keys, passwords, email addresses, phone numbers) before it is
    recorded. A forgotten memory stays only as a tombstone: its text loads nowhere, replay included.
    """


@memory.command()
@click.argument("text")
@click.option("--subject", required=True, help="Whom it is about: the authenticated user or account.")
@click.option("--tenant", required=True, help="Whose data it is.")
@click.option("--purpose", required=True, help="Which decisions it serves, e.g. support or billing.")
@click.option("--source", default="user_stated", show_default=True,
              help="Where it came from: user_stated, system_record or model_inferred.")
@click.option("--expires", metavar="DATE", help="When it stops loading (YYYY-MM-DD or an ISO datetime; UTC).")
@click.option("--review", metavar="DATE", help="When a person must look at it again; it stops loading until then.")
@pass_app
def add(
    app: App, text: str, subject: str, tenant: str, purpose: str, source: str, expires: str | None,
    review: str | None,
) -> None:
    """Record TEXT as a memory of SUBJECT in TENANT for PURPOSE; prints its id.

    Without --expires or --review the purpose's retention from the settings (memory_retention_days)
    sets the expiry; a model_inferred memory must have one of the three.
    """
    from runtime.memory import propose
    from runtime.memory.dates import parse
    from runtime.secrets import compiled

    expires_at = None if expires is None else parse(expires, "--expires")
    review_at = None if review is None else parse(review, "--review")
    memory_id, redacted = propose(
        app.store(), subject=subject, tenant=tenant, purpose=purpose, text=text, source=source,
        expires_at=expires_at, review_at=review_at, by=f"cli:{getpass.getuser()}",
        retention=app.settings().memory_retention_days, patterns=compiled(app.settings().secret_patterns),
    )
    click.echo(memory_id)
    if redacted:
        click.echo(f"agentd: redacted before it was recorded: {', '.join(redacted)}", err=True)


@memory.command("list")
@click.option("--subject", help="Only this subject's memories.")
@click.option("--tenant", help="Only this tenant's memories.")
@click.option("--forgotten", "with_forgotten", is_flag=True, help="Show forgotten memories too, as tombstones.")
@json_option
@pass_app
def list_(app: App, subject: str | None, tenant: str | None, with_forgotten: bool, as_json: bool) -> None:
    """Memories in the order recorded: scope, purpose, source, expiry or review date, and text."""
    from runtime.memory import from_rows
    from runtime.memory.dates import iso

    found = [
        m for m in from_rows(app.store().memories(subject=subject, tenant=tenant)).values()
        if with_forgotten or not m.forgotten
    ]
    if as_json:
        echo_json([
            {"memory_id": m.memory_id, "subject": m.subject, "tenant": m.tenant, "purpose": m.purpose,
             "source": m.source, "text": m.text, "created_at": m.created_at, "expires_at": iso(m.expires_at),
             "review_at": iso(m.review_at), "forgotten_at": m.forgotten_at, "forgotten_reason": m.forgotten_reason}
            for m in found
        ])
        return
    click.echo(table(
        [(m.memory_id, m.subject, m.tenant, m.purpose, m.source, _day(iso(m.expires_at)), _day(iso(m.review_at)),
          f"(forgotten {m.forgotten_at[:10]})" if m.forgotten else m.text) for m in found],
        ["ID", "SUBJECT", "TENANT", "PURPOSE", "SOURCE", "EXPIRES", "REVIEW", "TEXT"],
    ))


@memory.command()
@click.argument("memory_id", metavar="ID")
@click.option("--reason", default="", help="Why, kept with the tombstone (redacted like a memory's text).")
@pass_app
def forget(app: App, memory_id: str, reason: str) -> None:
    """Forget memory ID: a tombstone is recorded, and its text loads nowhere from then on."""
    from runtime.memory import forget as forgetting

    forgetting(app.store(), memory_id, reason, by=f"cli:{getpass.getuser()}")
    click.echo(f"memory {memory_id} forgotten")


def _day(moment: str | None) -> str | None:
    return None if moment is None else moment[:16].replace("T", " ")

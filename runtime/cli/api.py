"""`agentd api`: tokens for programs that use the HTTP API, one each, revocable."""

from __future__ import annotations

import getpass

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json, table


@click.group()
def api() -> None:
    """Tokens for programs that use the HTTP API (docs/api.md), one each, revocable."""


@api.group()
def token() -> None:
    """Make, list and revoke the HTTP API's tokens."""


@token.command()
@click.option("--name", required=True, help="Who holds it: one program, e.g. ci or dashboard.")
@pass_app
def create(app: App, name: str) -> None:
    """Make a token for one program and print it, once: only its hash is kept."""
    from runtime.harness import tokens

    click.echo(tokens.create(app.store(), name, by=f"cli:{getpass.getuser()}"))


@token.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """Every token by name: when it was made, and revoked."""
    from runtime.harness import tokens
    from store.events import API_TOKENS_STREAM

    found = sorted(tokens.tokens(app.store().read_stream(API_TOKENS_STREAM)).values(), key=lambda t: t.name)
    if as_json:
        echo_json([{"name": t.name, "created_at": t.created_at, "revoked_at": t.revoked_at} for t in found])
        return
    click.echo(table([(t.name, t.created_at[:19], t.revoked_at[:19] if t.revoked_at else "-") for t in found],
                     ["NAME", "CREATED (UTC)", "REVOKED (UTC)"]))


@token.command()
@click.argument("name")
@pass_app
def revoke(app: App, name: str) -> None:
    """Revoke a token: requests carrying it are refused from now on."""
    from runtime.harness import tokens

    tokens.revoke(app.store(), name, by=f"cli:{getpass.getuser()}")
    click.echo(f"token {name} revoked")

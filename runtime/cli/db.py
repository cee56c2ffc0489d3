"""`agentd db`: schema migrations and integrity checks."""

from __future__ import annotations

import click

from runtime.cli._app import App, pass_app
from store import migrate
from store.database import translating
from store.errors import DatabaseCorrupt


@click.group()
def db() -> None:
    """Migrate and check the database."""


@db.command()
@pass_app
def upgrade(app: App) -> None:
    """Apply the migrations this agentd ships (it also does so at every start)."""
    store = app.store()
    with store.reading() as conn:
        click.echo(f"database schema at revision {migrate.current_revision(conn)}")


@db.command()
@pass_app
def check(app: App) -> None:
    """Run SQLite's integrity check over every page of the database."""
    store = app.store()
    if not store.engines.is_sqlite:
        click.echo("integrity check is a SQLite command; nothing to do")
        return
    with translating(store.url), store.engines.read.connect() as conn:
        problems = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check")]
    if problems != ["ok"]:
        raise DatabaseCorrupt(f"integrity check failed: {problems[0]}")
    click.echo("ok")

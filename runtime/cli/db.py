"""`agentd db`: schema migrations and integrity checks."""

from __future__ import annotations

import click

from runtime.cli._app import App, pass_app
from store import audit, migrate
from store.mark import committed


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
    """Check the database as evidence: prints ok, or names the first seq where the log breaks.

    SQLite's integrity check over every page; the chain of hashes that links each event to the one
    before; the projections' high-water marks against the log; and the log against the last seq
    committed to it, which the writer keeps in a file beside the database, outside the WAL (a -wal
    cut short reads as a shorter log that is otherwise consistent).
    """
    store = app.reader()
    mark = committed(store.url)
    with store.reading() as conn:
        audit.check_integrity(conn)
        audit.check_log(conn, mark)
    click.echo("ok")

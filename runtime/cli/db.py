"""`agentd db`: schema migrations, integrity checks, and accepting a loss the checks found."""

from __future__ import annotations

import getpass

import click

from runtime.cli._app import App, pass_app
from store import audit, loss, migrate
from store.mark import Mark, committed


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
    cut short reads as a shorter log that is otherwise consistent). A loss accepted with `db
    accept-loss` is named after the ok.
    """
    store = app.reader()
    mark = committed(store.url)
    with store.reading() as conn:
        audit.check_integrity(conn)
        audit.check_log(conn, mark)
    accepted = loss.recorded(Mark.beside(store.url))
    if not accepted:
        click.echo("ok")
        return
    earlier = f" ({len(accepted) - 1} earlier loss{'es' if len(accepted) > 2 else ''} too)" if len(accepted) > 1 else ""
    click.echo(f"ok; {accepted[-1].describe()}{earlier}")


@db.command("accept-loss")
@click.option("--by", default=None, help="Who accepts the loss (default: your user name).")
@pass_app
def accept_loss(app: App, by: str | None) -> None:
    """Go on with a log that lost committed events (a -wal cut short, an older copy restored).

    Every command that writes, `serve` and `events export` refuse such a log, in the line `db check`
    gives. Restore the database with its -wal from a backup if you can; if not, this records what was
    lost, when and by whom in agentd.db-losses beside the database, then sets the high-water mark to the
    log as it is, so that agentd writes again. `db check` names the loss from then on.
    """
    accepted = app.store().accept_loss(by or getpass.getuser())
    click.echo(f"{accepted.describe()}; recorded in {loss.record_of(app.store().mark).name}")

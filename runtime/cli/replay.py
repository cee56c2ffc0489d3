"""`agentd replay`: rebuild the projections from the log and check them, or show the state as of a seq."""

from __future__ import annotations

import tempfile

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json, table
from store import replay as replaying


@click.command()
@click.option("--until", "until", type=click.IntRange(min=0), help="Show every task as it stood right after event SEQ.")
@json_option
@pass_app
def replay(app: App, until: int | None, as_json: bool) -> None:
    """Rebuild every projection from the log into a scratch database and compare with the live one.

    Exits non-zero and names the first difference when they disagree.
    """
    store = app.store()
    settings = app.settings()
    if until is not None:
        with store.reading() as conn:
            states = replaying.states_until(conn, until)
        if as_json:
            echo_json({"until": until, "tasks": [s.summary for s in states.values()]})
            return
        rows = [(s.task_id, s.summary.phase, s.summary.steps, s.summary.last_seq, s.summary.goal) for s in states.values()]
        click.echo(f"state as of event {until}:")
        click.echo(table(rows, ["ID", "PHASE", "STEPS", "LAST SEQ", "GOAL"]))
        return
    with tempfile.TemporaryDirectory(dir=settings.data_dir, prefix="replay-") as scratch:
        with store.reading() as conn:
            result = replaying.verify(conn, f"sqlite:///{scratch}/rebuilt.db")
    if as_json:
        echo_json({"events": result.events, "seconds": result.seconds, "match": True})
    else:
        click.echo(
            f"rebuilt the projections from {result.events} events in {result.seconds:.2f} s "
            f"({result.rate:,.0f} events/s); they match the live projections"
        )

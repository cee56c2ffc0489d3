"""`agentd notifications`: the queue, logged apart from the requests it feeds."""

from __future__ import annotations

import click

from notifications import queue
from runtime.cli._app import App, json_option, pass_app
from runtime.errors import InvalidCommand, NotFound
from runtime.output import echo_json, table


@click.group()
def notifications() -> None:
    """What was enqueued when, and which request of which task took it in."""


@notifications.command("list")
@click.option("--task", "task_id", help="Only notifications for this task.")
@click.option("--limit", type=click.IntRange(min=0), default=100, show_default=True, help="The last N (0: all).")
@json_option
@pass_app
def list_(app: App, task_id: str | None, limit: int, as_json: bool) -> None:
    """Enqueued at T → admitted into call N of task X (or still pending, or coalesced into another)."""
    with app.store().reading() as conn:
        rows = queue.listing(conn, task_id, limit or None)
    if as_json:
        echo_json(rows)
        return
    click.echo(
        table(
            [(r.seq, r.enqueued_at[:19].replace("T", " "), f"{r.source}/{r.kind}", r.task_id, _fate(r), r.text)
             for r in rows],
            ["SEQ", "ENQUEUED (UTC)", "SOURCE/KIND", "TASK", "ADMITTED", "TEXT"],
        )
    )


def _fate(r: queue.Listed) -> str:
    if r.admitted_call is None:
        return "pending"
    if r.coalesced_into:
        return f"call {r.admitted_call}, coalesced into {r.coalesced_into}"
    return f"call {r.admitted_call}"


@notifications.command()
@click.argument("task_id")
@click.argument("text")
@click.option("--kind", default="message", show_default=True, help="What happened, in one word (e.g. mode_switched).")
@pass_app
def send(app: App, task_id: str, text: str, kind: str) -> None:
    """Tell a task something from the operator; it reaches the task's next request, once."""
    store = app.store()
    state = store.task(task_id)
    if state is None:
        raise NotFound(f"no task {task_id!r}")
    if state.phase.finished:
        # It would wait forever and count in the queue's depth: a finished task makes no more requests
        # (a follow-up with `agentd task say` is a message of the user's, not a notification).
        raise InvalidCommand(
            f"task {task_id} is {state.phase.value}: it takes no more requests, so a notification would never reach one"
        )
    seq = queue.enqueue(store, queue.new_notification(source="operator", kind=kind, tasks=[task_id], text=text),
                        actor="operator")
    click.echo(f"enqueued as event {seq}")

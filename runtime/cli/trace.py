"""`agentd trace export`: a task's spans, derived from its events, as JSON lines or sent to a collector."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from runtime.cli._app import App, pass_app


@click.group()
def trace() -> None:
    """A task's OpenTelemetry spans, derived from the log: for any past, replayed or imported task."""


@trace.command()
@click.option("--task", "task_id", required=True, help="The task whose spans to export.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False),
              help="Write JSON lines to this file (default: standard output).")
@click.option("--otlp", "otlp", help="Send them to this OTLP/HTTP collector instead (http://host:4318).")
@pass_app
def export(app: App, task_id: str, output: Path | None, otlp: str | None) -> None:
    """Export one task's spans: the task, its decisions, model calls, tool calls, approval waits, skills
    and compactions, with the ids the live traces gave them."""
    from runtime.errors import InvalidCommand, NotFound
    from runtime.trace.export import JsonLines, exporter, send
    from runtime.trace.span import task_spans

    if output is not None and otlp is not None:
        raise InvalidCommand("give -o FILE or --otlp URL, not both")
    if otlp is not None and not otlp.startswith(("http://", "https://")):
        raise InvalidCommand(f"--otlp {otlp!r} is not an http:// or https:// address")
    from store import log

    with app.reader().reading() as conn:
        records = list(log.iter_records(conn, stream_id=task_id))
    if not records:
        raise NotFound(f"no task {task_id!r}")
    spans = task_spans(task_id, records)
    if otlp is not None:
        if not send(spans, exporter(otlp, sys.stdout)):
            raise InvalidCommand(f"the collector at {otlp} did not take the spans")
        click.echo(f"{len(spans)} spans sent to {otlp}", err=True)
        return
    if output is None:
        send(spans, JsonLines(sys.stdout))
        return
    tmp = output.with_name(f".{output.name}.part")
    with tmp.open("w", encoding="utf-8") as f:
        send(spans, JsonLines(f))
    tmp.replace(output)

"""`agentd task`: submit, list, show and cancel tasks."""

from __future__ import annotations

from pathlib import Path

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json, fields_table, table
from runtime.tasks import cancel_task, submit_task
from store import NO_STREAM
from store.errors import NotFound
from store.ids import new_task_id
from store.state import TaskState


@click.group()
def task() -> None:
    """Submit, list, show and cancel tasks."""


@task.command()
@click.argument("goal")
@click.option("--workspace", type=click.Path(path_type=Path), help="Folder the task may read and write.")
@click.option("--max-steps", type=click.IntRange(min=1), help="Model calls allowed before the task stops.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Tokens allowed before the task stops.")
@json_option
@pass_app
def submit(app: App, goal: str, workspace: Path | None, max_steps: int | None, max_tokens: int | None, as_json: bool) -> None:
    """Submit a task with GOAL; prints its id."""
    settings = app.settings(workspace=workspace)
    events = submit_task(goal, settings.workspace, max_steps=max_steps, max_tokens=max_tokens)
    task_id = new_task_id()
    records = app.store().append(task_id, events, expected_version=NO_STREAM, actor="cli")
    if as_json:
        echo_json({"task_id": task_id, "seq": records[-1].seq})
    else:
        click.echo(task_id)


@task.command("list")
@click.option("--phase", help="Only tasks in this phase.")
@json_option
@pass_app
def list_(app: App, phase: str | None, as_json: bool) -> None:
    """List tasks, oldest first."""
    summaries = app.store().tasks(phase=phase)
    if as_json:
        echo_json(summaries)
        return
    click.echo(
        table(
            [(s.task_id, s.phase, s.steps, s.submitted_at[:19].replace("T", " "), s.goal) for s in summaries],
            ["ID", "PHASE", "STEPS", "SUBMITTED (UTC)", "GOAL"],
        )
    )


@task.command()
@click.argument("task_id")
@click.option("--at", "at_seq", type=click.IntRange(min=1), help="Show the task as it was right after event SEQ.")
@json_option
@pass_app
def show(app: App, task_id: str, at_seq: int | None, as_json: bool) -> None:
    """Show one task: state, completed actions, approvals and artifacts."""
    store = app.store()
    state = store.task(task_id) if at_seq is None else store.task_at(task_id, at_seq)
    if state is None:
        where = f" as of event {at_seq}" if at_seq is not None else ""
        raise NotFound(f"no task {task_id!r}{where}")
    if as_json:
        echo_json(state)
        return
    click.echo(render_state(state))


def render_state(state: TaskState) -> str:
    s = state.summary
    parts = [
        fields_table(
            [
                ("task", s.task_id),
                ("goal", s.goal),
                ("phase", s.phase),
                ("workspace", s.workspace),
                ("tenant", s.tenant),
                ("steps", f"{s.steps} of {s.max_steps}"),
                ("tokens", f"{s.tokens_used} of {s.max_tokens}"),
                ("tests", s.test_status),
                ("submitted", s.submitted_at),
                ("updated", s.updated_at),
                ("finished", s.finished_at),
                ("as of event", f"{s.last_seq} (version {s.version})"),
            ]
        ),
        "",
        "completed actions:",
        table([(a.seq, a.tool, a.status, a.call_id) for a in state.actions], ["SEQ", "TOOL", "STATUS", "CALL"]),
        "",
        "approvals:",
        table(
            [(a.approval_id, a.tool, a.status, a.decided_by, a.reason) for a in state.approvals],
            ["ID", "TOOL", "STATUS", "DECIDED BY", "REASON"],
        ),
        "",
        "artifacts:",
        table(
            [(a.seq, a.operation, a.size, (a.sha256 or "")[:12], a.test_status, a.path) for a in state.artifacts],
            ["SEQ", "OP", "SIZE", "SHA256", "TESTS", "PATH"],
        ),
    ]
    return "\n".join(parts)


@task.command()
@click.argument("task_id")
@click.option("--reason", default="cancelled by the operator", show_default=True)
@pass_app
def cancel(app: App, task_id: str, reason: str) -> None:
    """Cancel a task that has not finished."""
    store = app.store()
    state = store.task(task_id)
    if state is None:
        raise NotFound(f"no task {task_id!r}")
    store.append(task_id, cancel_task(state, reason), expected_version=state.summary.version, actor="cli")
    click.echo(f"{task_id} cancelled")

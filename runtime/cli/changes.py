"""`agentd task diff`, `task undo` and `task redo`: what a task changed in its workspace, and putting it back."""

from __future__ import annotations

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.cli.task import task
from runtime.output import echo_json


@task.command()
@click.argument("task_id")
@click.option("--path", "only", metavar="P", help="Only the changes to this file (relative to the workspace).")
@json_option
@pass_app
def diff(app: App, task_id: str, only: str | None, as_json: bool) -> None:
    """The unified diff of every change the task made to its workspace, file by file, in the order made."""
    from runtime.harness.task_diff import task_diff

    shown = task_diff(task_id, app.store().read_stream(task_id), app.artifacts(), only)
    if as_json:
        echo_json([s.as_json() for s in shown])
        return
    if not shown:
        click.echo("(no changes)")
        return
    for s in shown:
        d = s.diff
        click.echo(f"# event {s.seq}, {s.by}: {d.path} {d.kind} (+{d.added} -{d.removed})")
        click.echo(d.text, nl=False)


def _restore_command(kind: str):
    @click.argument("task_id")
    @click.option("--path", "only", metavar="P", help=f"{kind.capitalize()} only this file's changes.")
    @click.option("--dry-run", is_flag=True, help="Say what would be done and change nothing.")
    @json_option
    @pass_app
    def command(app: App, task_id: str, only: str | None, dry_run: bool, as_json: bool) -> None:
        from runtime.harness import undo

        outcome = undo.restore(
            app.store(), app.artifacts(), task_id, kind,  # type: ignore[arg-type]
            by="cli", only=only, dry_run=dry_run,
        )
        lines = undo.describe(outcome)
        if as_json:
            from runtime.harness.task_diff import restore_json

            echo_json(restore_json(task_id, kind, dry_run, outcome))
            return
        if outcome.finished_first:
            click.echo(f"finished an interrupted undo or redo first: {', '.join(outcome.finished_first)}")
        prefix = "would " if dry_run else ""
        for line in lines:
            click.echo(prefix + line)
        if outcome.skipped:
            click.echo(f"left as found (changed meanwhile): {', '.join(outcome.skipped)}", err=True)

    return command


undo = task.command(
    "undo",
    help="Put every file the task changed back as it was before the task: files it created are deleted, files "
    "it deleted come back. A file changed by someone else since is not touched: one line names it and nothing is "
    "undone.",
)(_restore_command("undo"))
redo = task.command(
    "redo", help="Make the task's changes again after an undo, with the same checks as undo."
)(_restore_command("redo"))


def changes_section(records, artifacts) -> str:
    """`task show`'s list of the files the task changed: each with its lines added and removed from before
    the task's first change to after its last, and whether that is undone."""
    from runtime.artifacts import REF_PREFIX
    from runtime.tools import changes, diff as diff_

    folded = changes.fold(records)
    if not folded.files:
        return "changes:\n(none)"
    lines = ["changes:"]
    for h in folded.files.values():
        load = lambda digest: None if digest is None else artifacts.get(REF_PREFIX + digest)  # noqa: E731
        d = diff_.file_diff(h.path, load(h.before), load(h.after))
        state = " (undone)" if h.undone else "" if h.net else " (back as it was)"
        counts = "binary" if d.binary else f"+{d.added} -{d.removed}"
        lines.append(f"{h.path} ({counts}) {d.kind}{state}")
    return "\n".join(lines) + "\n(agentd task diff shows them; agentd task undo puts them back)"

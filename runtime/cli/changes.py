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
    from runtime.artifacts import REF_PREFIX, ArtifactStore
    from runtime.errors import InvalidCommand, NotFound
    from runtime.tools import changes, diff as diff_
    from store.events import FileChanged, FileRestored

    records = app.store().read_stream(task_id)
    if not records:
        raise NotFound(f"no task {task_id!r}")
    folded = changes.fold(records)
    if only is not None and only not in folded.files:
        raise InvalidCommand(f"the task did not change {only}")
    artifacts = ArtifactStore(app.settings().artifacts_dir)
    load = lambda digest: artifacts.get(REF_PREFIX + digest)  # noqa: E731
    shown = []
    for rec in sorted((r for h in folded.files.values() for r in h.changes), key=lambda r: r.seq):
        e = rec.event
        if only is not None and e.path != only:
            continue
        if isinstance(e, FileChanged):
            before, after = e.before_sha256, e.after_sha256
            by = f"{e.call_id} {folded.tools.get(e.call_id, '?')}"
        else:
            assert isinstance(e, FileRestored)
            before, after = e.from_sha256, e.to_sha256
            by = f"{e.kind} {e.restore_id} by {rec.actor}"
        try:
            d = diff_.file_diff(e.path, *(None if digest is None else load(digest) for digest in (before, after)))
        except NotFound:
            # An imported log carries the events, not the artifact store: the change is known, its text is not.
            kind = "created" if before is None else "deleted" if after is None else "changed"
            d = diff_.FileDiff(e.path, kind, "(its contents are not in this data folder's artifact store)\n", 0, 0)
        shown.append((rec, by, d))
    if as_json:
        echo_json([
            {"seq": rec.seq, "by": by, "path": d.path, "kind": d.kind, "added": d.added, "removed": d.removed,
             "binary": d.binary, "diff": d.text}
            for rec, by, d in shown
        ])
        return
    if not shown:
        click.echo("(no changes)")
        return
    for rec, by, d in shown:
        click.echo(f"# event {rec.seq}, {by}: {d.path} {d.kind} (+{d.added} -{d.removed})")
        click.echo(d.text, nl=False)


def _restore_command(kind: str):
    @click.argument("task_id")
    @click.option("--path", "only", metavar="P", help=f"{kind.capitalize()} only this file's changes.")
    @click.option("--dry-run", is_flag=True, help="Say what would be done and change nothing.")
    @json_option
    @pass_app
    def command(app: App, task_id: str, only: str | None, dry_run: bool, as_json: bool) -> None:
        from runtime.artifacts import ArtifactStore
        from runtime.harness import undo

        outcome = undo.restore(
            app.store(), ArtifactStore(app.settings().artifacts_dir), task_id, kind,  # type: ignore[arg-type]
            by="cli", only=only, dry_run=dry_run,
        )
        lines = undo.describe(outcome)
        if as_json:
            echo_json({
                "task_id": task_id, "kind": kind, "dry_run": dry_run, "restore_id": outcome.restore_id,
                "files": [r.model_dump() for r in outcome.restores], "finished_first": list(outcome.finished_first),
                "skipped": list(outcome.skipped),
            })
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


def changes_section(records, artifacts_dir) -> str:
    """`task show`'s list of the files the task changed: each with its lines added and removed from before
    the task's first change to after its last, and whether that is undone."""
    from runtime.artifacts import REF_PREFIX, ArtifactStore
    from runtime.tools import changes, diff as diff_

    folded = changes.fold(records)
    if not folded.files:
        return "changes:\n(none)"
    artifacts = ArtifactStore(artifacts_dir)
    lines = ["changes:"]
    for h in folded.files.values():
        load = lambda digest: None if digest is None else artifacts.get(REF_PREFIX + digest)  # noqa: E731
        d = diff_.file_diff(h.path, load(h.before), load(h.after))
        state = " (undone)" if h.undone else "" if h.net else " (back as it was)"
        counts = "binary" if d.binary else f"+{d.added} -{d.removed}"
        lines.append(f"{h.path} ({counts}) {d.kind}{state}")
    return "\n".join(lines) + "\n(agentd task diff shows them; agentd task undo puts them back)"

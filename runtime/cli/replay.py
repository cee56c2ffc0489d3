"""`agentd replay`: rebuild the projections from the log and check them, or show the state as of a seq."""

from __future__ import annotations

import tempfile

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.errors import RecordingMismatch
from runtime.output import echo_json, table
from store import audit, replay as replaying
from store.mark import committed


@click.command()
@click.option("--until", "until", type=click.IntRange(min=0), help="Show every task as it stood right after event SEQ.")
@click.option("--task", "task_id", help="With --recorded or --policy: the task.")
@click.option("--recorded", is_flag=True, help="Re-run the task's decisions against its recorded model outputs.")
@click.option("--policy", "policy", metavar="POLICY",
              help="Build the task's requests again under this context policy and show what each would hold.")
@json_option
@pass_app
def replay(app: App, until: int | None, task_id: str | None, recorded: bool, policy: str | None, as_json: bool) -> None:
    """Rebuild every projection from the log into a scratch database and compare with the live one.

    Exits non-zero and names the first difference when they disagree, or the first seq where the log
    is not the one committed (as `agentd db check` finds it). With --task ID --recorded,
    rebuild each of the task's requests with today's code instead, feed it the recorded model output,
    and name the first step whose manifest or outcome differs. With --task ID --policy NAME, show call
    by call what the requests would have held under another context policy.
    """
    # Usage first: a mistyped command is said as such, whether or not there is a database to read.
    if policy is not None and (not task_id or recorded):
        raise click.UsageError("--policy goes with --task alone: agentd replay --task ID --policy NAME")
    if policy is None and (recorded or task_id) and not (recorded and task_id):
        raise click.UsageError("--recorded and --task go together: agentd replay --task ID --recorded")
    store = app.store()
    settings = app.settings()
    if policy is not None:
        _reassemble(app, task_id, policy, as_json)
        return
    if recorded or task_id:
        # The agent loop and the daemon's wiring (the model) are for --recorded alone: a rebuild or
        # --until does not wait the second it takes to import them.
        from runtime.agent.rerun import rerun_recorded
        from runtime.daemon.wiring import open_runtime

        report = rerun_recorded(open_runtime(settings, store), task_id)
        if as_json:
            echo_json({"task_id": task_id, "calls": report.calls, "difference": str(report.difference or "") or None})
        if report.difference is not None:
            raise RecordingMismatch(f"task {task_id} differs from its recording at {report.difference}")
        if not as_json:
            click.echo(f"re-ran {report.calls} model calls of {task_id} on their recorded outputs: every manifest "
                       "and outcome matches")
        return
    if until is not None:
        with store.reading() as conn:
            folded = replaying.states_until(conn, until)
        states = folded.states()
        schedules = list(folded.schedules.values())
        if as_json:
            echo_json({
                "until": until,
                "tasks": [s.summary for s in states.values()],
                "notifications": {t: s.notifications for t, s in states.items() if s.notifications},
                "jobs": {t: s.jobs for t, s in states.items() if s.jobs},
                "schedules": schedules,
            })
            return
        rows = [
            (s.task_id, s.summary.phase, s.summary.steps, len(s.waiting_notifications), len(s.running_jobs),
             s.summary.last_seq, s.summary.goal)
            for s in states.values()
        ]
        click.echo(f"state as of event {until}:")
        click.echo(table(rows, ["ID", "PHASE", "STEPS", "QUEUED", "JOBS RUNNING", "LAST SEQ", "GOAL"]))
        if schedules:
            click.echo("\nschedules:")
            click.echo(table(
                [(s.schedule_id, s.cron, s.fired, s.last_fire_time, "removed" if s.removed_seq else "live")
                 for s in schedules],
                ["ID", "CRON", "FIRED", "LAST FIRE", "STATE"],
            ))
        return
    from runtime import disk

    # Beside the data, on its disk; a data directory that cannot be written is replayed in the system's.
    scratch_root = None if disk.read_only(settings.data_dir) else settings.data_dir
    with tempfile.TemporaryDirectory(dir=scratch_root, prefix="replay-") as scratch:
        mark = committed(store.url)
        with store.reading() as conn:
            result = replaying.verify(conn, f"sqlite:///{scratch}/rebuilt.db")
            # A log cut short folds into projections that agree with it: matching is not the whole story.
            audit.check_log(conn, mark)
    if as_json:
        echo_json({"events": result.events, "seconds": result.seconds, "match": True})
    else:
        click.echo(
            f"rebuilt the projections from {result.events} events in {result.seconds:.2f} s "
            f"({result.rate:,.0f} events/s); they match the live projections"
        )


def _reassemble(app: App, task_id: str, policy: str, as_json: bool) -> None:
    from runtime.agent import policy as policies
    from runtime.agent.rerun import reassemble
    from runtime.daemon.wiring import open_runtime

    policies.parse(policy)  # a bad name fails before the model is loaded
    store = app.store()
    calls = reassemble(open_runtime(app.settings(), store), task_id, policy)
    if as_json:
        echo_json({"task_id": task_id, "policy": policy, "calls": calls})
        return
    click.echo(f"{task_id} under {policy}: each decision's first request, built from the recorded history")
    click.echo(table(
        [(c.call_index, c.recorded_tokens, "over" if c.tokens is None else c.tokens, c.left_out, c.left_out_tokens,
          c.note) for c in calls],
        ["CALL", "RECORDED", "TOKENS", "LEFT OUT", "LEFT OUT TOKENS", "NOTE"],
    ))

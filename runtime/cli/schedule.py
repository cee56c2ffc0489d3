"""`agentd schedule`: add, list and remove cron schedules that submit tasks."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from runtime.cli._app import App, json_option, pass_app, task_options
from runtime.errors import InvalidCommand
from runtime.harness.schedules import Schedule, add_schedule, load_schedule, load_schedules, remove_schedule
from runtime.output import echo_json, table
from store.events import SCHEDULES_STREAM


@click.group()
def schedule() -> None:
    """Submit tasks on a cron schedule; the schedules live in agentd's database and survive restarts.

    `agentd serve` fires them. Firings missed while agentd was down are coalesced: on the next start
    a schedule fires once, for the latest missed time, not once per missed time.
    """


@schedule.command()
@click.argument("goal")
@click.option(
    "--cron",
    required=True,
    help='When: a crontab expression, "minute hour day month weekday" (weekday 0 or 7 is Sunday), '
    'or six fields with seconds first, e.g. "0 7 * * *" for 07:00 every day.',
)
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone the expression is read in.")
@click.option("--workspace", type=click.Path(path_type=Path), help="Folder each task may read and write.")
@task_options("each task")
@json_option
@pass_app
def add(
    app: App, goal: str, cron: str, timezone: str, workspace: Path | None, profile: str, tenant: str,
    allowed: tuple[str, ...], as_json: bool,
) -> None:
    """Submit a task with GOAL whenever CRON fires; prints the schedule's id and its next firing."""
    # Imported here: loading the profiles loads every tool, which `schedule list` and `remove` do not need.
    from runtime.agent import plugins

    settings = app.settings(workspace=workspace)
    known = plugins.load(settings.plugins).profiles
    if profile not in known:
        raise InvalidCommand(f"no profile {profile!r}; loaded profiles: {', '.join(sorted(known))}")
    added = add_schedule(
        cron, goal, settings.workspace, profile=profile, tenant=tenant, allowed_effects=("read", *allowed),
        timezone=timezone, secret_patterns=settings.secrets.patterns,
    )
    store = app.store()
    [record] = store.append(SCHEDULES_STREAM, [added], actor="cli")
    with store.reading() as conn:
        added_schedule = load_schedule(conn, added.schedule_id)
    assert added_schedule is not None
    upcoming = _next(added_schedule)
    if as_json:
        echo_json({"schedule_id": added.schedule_id, "next_fire_time": _iso(upcoming), "seq": record.seq})
    else:
        click.echo(f"{added.schedule_id}  next firing {_local(upcoming)}")


@schedule.command("list")
@click.option("--all", "include_removed", is_flag=True, help="Include removed schedules.")
@json_option
@pass_app
def list_(app: App, include_removed: bool, as_json: bool) -> None:
    """List schedules: when each fires next, how often it fired, and its last task."""
    with app.store().reading() as conn:
        found = load_schedules(conn, include_removed=include_removed)
    if as_json:
        echo_json([_as_dict(s) for s in found])
        return
    click.echo(
        table(
            [
                (
                    s.schedule_id + (" (removed)" if s.removed else ""), s.cron, s.timezone,
                    None if s.removed else _local(_next(s)), s.fired, _local(_last(s)), s.last_task_id, s.goal,
                )
                for s in found
            ],
            ["ID", "CRON", "TIMEZONE", "NEXT", "FIRED", "LAST FIRED", "LAST TASK", "GOAL"],
        )
    )


@schedule.command()
@click.argument("schedule_id")
@pass_app
def remove(app: App, schedule_id: str) -> None:
    """Remove a schedule; it fires no more. Tasks it submitted are not touched."""
    store = app.store()
    with store.reading() as conn:
        removed = remove_schedule(load_schedule(conn, schedule_id), schedule_id)
    store.append(SCHEDULES_STREAM, [removed], actor="cli")
    click.echo(f"removed {schedule_id}")


def _next(s: Schedule) -> datetime | None:
    return s.next_fire_time(datetime.now(UTC))


def _last(s: Schedule) -> datetime | None:
    if s.last_fire_time is None:
        return None
    return datetime.fromisoformat(s.last_fire_time).astimezone(s.trigger().timezone)


def _local(when: datetime | None) -> str | None:
    """In the schedule's own time zone, as the expression was written."""
    return None if when is None else when.strftime("%Y-%m-%d %H:%M:%S %Z")


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _as_dict(s: Schedule) -> dict:
    return {
        "schedule_id": s.schedule_id,
        "cron": s.cron,
        "timezone": s.timezone,
        "goal": s.goal,
        "workspace": s.workspace,
        "profile": s.profile,
        "tenant": s.tenant,
        "allowed_effects": list(s.allowed_effects),
        "added_at": s.added_at,
        "removed": s.removed,
        "next_fire_time": None if s.removed else _iso(_next(s)),
        "fired": s.fired,
        "last_fire_time": s.last_fire_time,
        "last_task_id": s.last_task_id,
    }

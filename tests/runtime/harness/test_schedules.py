"""Schedules: each firing recorded once and its task submitted once, across runners, restarts and crashes."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from runtime.errors import InvalidCommand
from runtime.harness.schedules import (
    ScheduleRunner,
    add_schedule,
    cron_trigger,
    fire_time_text,
    latest_fire_time,
)
from store import EventStore
from store.events import SCHEDULES_STREAM, ScheduleFired, TaskSubmitted
from store.log import iter_records
from tests.helpers import run_agentd


@pytest.fixture
def store(db_url: str):
    with EventStore(db_url) as s:
        yield s


def add(store: EventStore, workspace: Path, cron: str, goal: str = "say hello") -> str:
    added = add_schedule(cron, goal, workspace, profile="workspace", tenant="default", allowed_effects=("read",))
    store.append(SCHEDULES_STREAM, [added], actor="test")
    return added.schedule_id


def firings(store: EventStore, schedule_id: str) -> list[ScheduleFired]:
    return [
        r.event for r in store.read_stream(SCHEDULES_STREAM)
        if isinstance(r.event, ScheduleFired) and r.event.schedule_id == schedule_id
    ]


def submissions(store: EventStore) -> list:
    with store.reading() as conn:
        return list(iter_records(conn, types=("TaskSubmitted",)))


async def wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await anyio.sleep(0.05)


def assert_exactly_once(store: EventStore, schedule_id: str) -> list[ScheduleFired]:
    """Every fire time recorded once, and each firing's task submitted once, by the schedule."""
    fired = firings(store, schedule_id)
    times = [f.fire_time for f in fired]
    assert times == sorted(set(times)), f"a fire time was recorded twice: {times}"
    by_task = {}
    for rec in submissions(store):
        by_task.setdefault(rec.stream_id, []).append(rec)
    for f in fired:
        [rec] = by_task[f.task_id]
        assert rec.actor == f"schedule:{schedule_id}"
    return fired


# -- the command line -------------------------------------------------------------------------------


def test_add_list_and_remove_on_the_command_line(agentd, isolated: Path) -> None:
    added = agentd("schedule", "add", "--cron", "0 7 * * 1", "--timezone", "Europe/Amsterdam", "--allow", "write",
                   "morning report")
    assert added.returncode == 0, added.stderr
    schedule_id, _, upcoming = added.stdout.strip().partition("  next firing ")
    assert schedule_id.startswith("s-")
    # Crontab's 1 is Monday (APScheduler 3 on its own would read it as Tuesday).
    when = datetime.strptime(upcoming[:19], "%Y-%m-%d %H:%M:%S")
    assert (when.weekday(), when.hour, when.minute) == (0, 7, 0)
    assert upcoming.endswith(("CET", "CEST"))

    listed = agentd("schedule", "list", "--json")
    [row] = json.loads(listed.stdout)
    assert row["schedule_id"] == schedule_id
    assert (row["cron"], row["timezone"], row["goal"]) == ("0 7 * * 1", "Europe/Amsterdam", "morning report")
    assert (row["fired"], row["last_fire_time"], row["last_task_id"]) == (0, None, None)
    assert row["allowed_effects"] == ["read", "write"]
    assert datetime.fromisoformat(row["next_fire_time"]).weekday() == 0
    table = agentd("schedule", "list").stdout
    assert schedule_id in table and "morning report" in table and "NEXT" in table

    removed = agentd("schedule", "remove", schedule_id)
    assert removed.returncode == 0 and schedule_id in removed.stdout
    assert json.loads(agentd("schedule", "list", "--json").stdout) == []
    assert json.loads(agentd("schedule", "list", "--all", "--json").stdout)[0]["removed"] is True

    again = agentd("schedule", "remove", schedule_id)
    unknown = agentd("schedule", "remove", "s-00000000")
    bad_cron = agentd("schedule", "add", "--cron", "61 * * * *", "goal")
    bad_zone = agentd("schedule", "add", "--cron", "0 7 * * *", "--timezone", "Mars/Olympus", "goal")
    key = "sk-live-4f9a0c21d4e8b7a6c5d3"
    secret = agentd("schedule", "add", "--cron", "0 7 * * *", f"rotate the key {key} every morning")
    for result, words in (
        (again, "already removed"),
        (unknown, "no schedule 's-00000000'"),
        (bad_cron, "'61 * * * *'"),
        (bad_zone, "unknown time zone 'Mars/Olympus'"),
        (secret, "holds a secret (api_key)"),
    ):
        assert result.returncode != 0
        assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert key not in secret.stderr
    assert [r["schedule_id"] for r in json.loads(agentd("schedule", "list", "--all", "--json").stdout)] == [schedule_id]


# -- cron expressions ----------------------------------------------------------------------------------


def test_cron_expressions_are_read_as_cron_reads_them() -> None:
    now = datetime(2026, 3, 4, 12, 0, 0, tzinfo=UTC)  # a Wednesday
    assert cron_trigger("0 7 * * 1").get_next_fire_time(None, now).weekday() == 0
    assert cron_trigger("0 7 * * 0").get_next_fire_time(None, now).weekday() == 6
    assert cron_trigger("0 7 * * 7").get_next_fire_time(None, now).weekday() == 6
    weekdays = cron_trigger("0 7 * * 1-5")
    seen, t = set(), now
    for _ in range(10):
        t = weekdays.get_next_fire_time(None, t + timedelta(seconds=1))
        seen.add(t.weekday())
    assert seen == {0, 1, 2, 3, 4}
    # Six fields: seconds first.
    assert cron_trigger("*/15 * * * * *").get_next_fire_time(None, now + timedelta(seconds=1)).second == 15
    amsterdam = cron_trigger("0 7 * * *", "Europe/Amsterdam").get_next_fire_time(None, now)
    assert fire_time_text(amsterdam) == "2026-03-05T06:00:00+00:00"
    for cron, words in (
        ("61 * * * *", "not valid"),
        ("* * *", "3 fields"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 1 * 1", "both"),
        ("0 7 * * 8", "not valid"),
    ):
        with pytest.raises(InvalidCommand, match=words):
            cron_trigger(cron)
    with pytest.raises(InvalidCommand, match="unknown time zone"):
        cron_trigger("0 7 * * *", "Nowhere/Town")


def test_missed_fire_times_coalesce_into_the_latest() -> None:
    minutely = cron_trigger("* * * * *")
    start = datetime(2026, 3, 4, 12, 0, 0, tzinfo=UTC)
    assert latest_fire_time(minutely, start, start + timedelta(minutes=10, seconds=30)) == start + timedelta(minutes=10)
    assert latest_fire_time(minutely, start, start + timedelta(seconds=59)) is None
    # A yearly schedule after eight months of silence: one lookup chain, not one per minute.
    yearly = cron_trigger("0 0 1 1 *")
    assert latest_fire_time(yearly, start, start + timedelta(days=250)) is None
    assert latest_fire_time(yearly, start, start + timedelta(days=400)) == datetime(2027, 1, 1, tzinfo=UTC)


# -- firing ---------------------------------------------------------------------------------------------


def test_a_schedule_submits_a_task_when_it_fires(store, workspace) -> None:
    schedule_id = add(store, workspace, "* * * * * *", goal="check the inbox")

    async def main() -> None:
        async with ScheduleRunner(store, refresh_s=60):
            await wait_for(lambda: firings(store, schedule_id), timeout=2.5)

    started = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - started < 2.5
    [fired, *_] = assert_exactly_once(store, schedule_id)
    [submitted] = store.read_stream(fired.task_id)
    assert isinstance(submitted.event, TaskSubmitted)
    assert submitted.actor == f"schedule:{schedule_id}"
    assert (submitted.event.goal, submitted.event.workspace) == ("check the inbox", str(workspace.resolve()))


def test_two_runners_never_submit_one_firing_twice(db_url, workspace) -> None:
    # Two stores on one database: two writers, as two agentd processes would have.
    with EventStore(db_url) as one, EventStore(db_url) as two:
        schedule_id = add(one, workspace, "* * * * * *")

        async def main() -> None:
            async with ScheduleRunner(one, refresh_s=60), ScheduleRunner(two, refresh_s=60):
                await anyio.sleep(3.2)

        anyio.run(main)
        fired = assert_exactly_once(one, schedule_id)
        assert len(fired) >= 2
        assert len(submissions(one)) == len(fired)


def test_a_restart_fires_once_for_the_missed_period_and_keeps_the_schedules(db_url, workspace) -> None:
    with EventStore(db_url) as first:
        schedule_id = add(first, workspace, "* * * * * *")

        async def before() -> None:
            async with ScheduleRunner(first, refresh_s=60):
                await anyio.sleep(1.6)

        anyio.run(before)
        last_before = firings(first, schedule_id)[-1].fire_time
    time.sleep(3.0)  # three firings missed while nothing runs

    # A new store and runner, as after a restart: the schedule is read back from the tables.
    with EventStore(db_url) as second:
        caught_up: list[ScheduleFired] = []

        async def after() -> None:
            async with ScheduleRunner(second, refresh_s=60):
                restarted = datetime.now(UTC)
                caught_up.extend(f for f in firings(second, schedule_id) if f.fire_time > last_before)
                assert len(caught_up) == 1, "the missed firings were not coalesced into one"
                assert datetime.fromisoformat(caught_up[0].fire_time) > restarted - timedelta(seconds=2)
                await anyio.sleep(1.5)

        anyio.run(after)
        fired = assert_exactly_once(second, schedule_id)
        later = [f.fire_time for f in fired if f.fire_time > last_before]
        assert later[0] == caught_up[0].fire_time
        # The schedule goes on after the catch-up, and nothing from the gap turns up later.
        assert len(later) > 1, later
        assert (datetime.fromisoformat(later[0]) - datetime.fromisoformat(last_before)).total_seconds() >= 3


def test_stopping_waits_for_a_firing_already_being_recorded(store, workspace) -> None:
    """APScheduler's shutdown cancels running jobs; the append in flight must still land before stop returns."""
    schedule_id = add(store, workspace, "* * * * * *")
    gate = threading.Event()
    entered = threading.Event()
    gated = False

    def clock() -> datetime:
        # Called in the worker thread that records the firing: hold it there until the test lets go.
        if gated:
            entered.set()
            gate.wait(10)
        return datetime.now(UTC)

    async def main() -> tuple[bool, int]:
        nonlocal gated
        runner = ScheduleRunner(store, clock=clock, refresh_s=60)
        await runner.start()
        before = len(firings(store, schedule_id))
        gated = True
        await anyio.to_thread.run_sync(entered.wait, 10)
        stopped = anyio.Event()

        async def stop() -> None:
            await runner.stop()
            stopped.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop)
            await anyio.sleep(0.3)
            stopped_while_held = stopped.is_set()
            gate.set()
        return stopped_while_held, before

    stopped_while_held, before = anyio.run(main)
    assert not stopped_while_held, "stop() returned while a firing was still being recorded"
    assert len(firings(store, schedule_id)) == before + 1
    assert_exactly_once(store, schedule_id)


def test_an_hour_of_missed_minutes_is_one_firing(store, workspace) -> None:
    schedule_id = add(store, workspace, "* * * * *")
    later = datetime.now(UTC) + timedelta(hours=1)

    async def main() -> None:
        async with ScheduleRunner(store, clock=lambda: later, refresh_s=60):
            pass

    anyio.run(main)
    [fired] = assert_exactly_once(store, schedule_id)
    assert fired.fire_time == fire_time_text(later.replace(second=0, microsecond=0))


def test_a_new_schedule_does_not_fire_for_times_before_it_was_added(store, workspace) -> None:
    # 1 January of this year has passed, but before the schedule existed.
    schedule_id = add(store, workspace, "0 0 1 1 *")

    async def main() -> None:
        async with ScheduleRunner(store, refresh_s=60):
            await anyio.sleep(0.2)

    anyio.run(main)
    assert firings(store, schedule_id) == []


def test_a_firing_recorded_without_its_task_is_completed_on_start(db_url, workspace) -> None:
    with EventStore(db_url) as store:
        schedule_id = add(store, workspace, "0 0 1 1 *")
        # A crash between the two appends: the firing is in the log, its task is not.
        now = fire_time_text(datetime.now(UTC))
        crashed = ScheduleFired(schedule_id=schedule_id, fire_time=now, task_id="t-crashed")
        store.append(SCHEDULES_STREAM, [crashed], actor=f"schedule:{schedule_id}")
        assert store.read_stream("t-crashed") == []

    # Two runners start on it at once; the task is submitted once.
    with EventStore(db_url) as one, EventStore(db_url) as two:
        async def main() -> None:
            async with ScheduleRunner(one, refresh_s=60), ScheduleRunner(two, refresh_s=60):
                pass

        anyio.run(main)
        [submitted] = one.read_stream("t-crashed")
        assert isinstance(submitted.event, TaskSubmitted) and submitted.actor == f"schedule:{schedule_id}"
        assert firings(one, schedule_id) == [crashed]


def test_a_schedule_added_and_removed_by_another_process_is_picked_up_without_restart(store, isolated: Path) -> None:
    def cli(*args: str):
        return anyio.to_thread.run_sync(lambda: run_agentd(*args))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ScheduleRunner(store, refresh_s=0.2).run)
            added = await cli("schedule", "add", "--cron", "* * * * * *", "from the command line")
            assert added.returncode == 0, added.stderr
            schedule_id = added.stdout.split()[0]
            await wait_for(lambda: firings(store, schedule_id), timeout=3)
            removed = await cli("schedule", "remove", schedule_id)
            assert removed.returncode == 0, removed.stderr
            await anyio.sleep(0.6)
            count = len(firings(store, schedule_id))
            await anyio.sleep(1.5)
            assert len(firings(store, schedule_id)) == count, "a removed schedule fired again"
            tg.cancel_scope.cancel()
        assert_exactly_once(store, schedule_id)

    anyio.run(main)


def test_a_locked_database_as_the_runner_starts_delays_the_firing_and_does_not_stop_the_runner(
    db_url, workspace
) -> None:
    with EventStore(db_url) as store:
        schedule_id = add(store, workspace, "0 0 1 1 *")
        crashed = ScheduleFired(schedule_id=schedule_id, fire_time=fire_time_text(datetime.now(UTC)), task_id="t-late")
        store.append(SCHEDULES_STREAM, [crashed], actor=f"schedule:{schedule_id}")

    # Another process holds the write lock while the runner starts, so completing the firing fails.
    holder = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    with EventStore(db_url, busy_timeout_ms=50) as store:
        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ScheduleRunner(store, refresh_s=0.1).run)
                await anyio.sleep(0.5)
                assert store.read_stream("t-late") == []
                holder.execute("ROLLBACK")
                await wait_for(lambda: store.read_stream("t-late") != [], timeout=10)
                tg.cancel_scope.cancel()

        try:
            anyio.run(main)
        finally:
            holder.close()
        [submitted] = store.read_stream("t-late")
        assert isinstance(submitted.event, TaskSubmitted)

"""Schedules: cron expressions that submit tasks, each firing recorded once in the log, whoever fires it."""

from __future__ import annotations

import asyncio
import secrets
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Callable, Sequence

import anyio
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import Connection

from runtime import logs
from runtime.errors import InvalidCommand, NotFound
from runtime.harness.tasks import submit_task
from runtime.secrets.patterns import SECRETS, Pattern, redacted
from store import NO_STREAM, EventStore
from store.errors import AgentdError, ConcurrencyConflict
from store.events import SCHEDULES_STREAM, ScheduleAdded, ScheduleFired, ScheduleRemoved
from store.events.task import EFFECTS
from store.ids import new_task_id
from store.log import stream_version
from store.queries import schedules as stored

log = logs.get_logger("agentd.schedules")

REFRESH_S = 5.0
# Each retry follows a conflict on the shared `schedules` stream, which any add, remove or firing of
# any schedule causes; a handful is plenty, and a loser that runs out merely leaves the firing to others.
FIRE_RETRIES = 20
_TICK = timedelta(microseconds=1)
_SECOND = timedelta(seconds=1)
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")

# -- cron expressions -----------------------------------------------------------------------------


def cron_trigger(cron: str, timezone: str = "UTC") -> CronTrigger:
    """The APScheduler trigger for a crontab expression, read as cron reads it.

    Five fields (minute hour day month weekday), or six with seconds first. Weekdays count as in
    crontab (0 or 7 is Sunday); APScheduler 3 counts from Monday, so they are passed on as names.
    Raises InvalidCommand, naming the expression, for anything cron would not run as written.
    """
    zone = _zone(timezone)
    fields = cron.split()
    if len(fields) == 5:
        fields = ["0", *fields]
    elif len(fields) != 6:
        raise InvalidCommand(
            f"cron expression {cron!r} has {len(fields)} fields; it needs 5 (minute hour day month weekday), "
            "or 6 with seconds first"
        )
    second, minute, hour, day, month, weekday = fields
    if day != "*" and weekday != "*":
        # Cron fires when either matches; APScheduler only when both do. Refused rather than run differently.
        raise InvalidCommand(f"cron expression {cron!r} restricts both the day of the month and the weekday; pick one")
    try:
        trigger = CronTrigger(
            second=second, minute=minute, hour=hour, day=day, month=month, day_of_week=_weekdays(weekday),
            timezone=zone,
        )
    except ValueError as e:
        raise InvalidCommand(f"cron expression {cron!r} is not valid: {e}") from None
    if trigger.get_next_fire_time(None, datetime.now(UTC)) is None:
        raise InvalidCommand(f"cron expression {cron!r} never fires")
    return trigger


def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        if not name:
            raise ValueError
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidCommand(f"unknown time zone {name!r}; use an IANA name such as Europe/Amsterdam or UTC") from None


def _weekdays(field: str) -> str:
    """A crontab weekday field as APScheduler weekday names."""
    if field == "*":
        return "*"
    days: set[int] = set()
    for item in field.split(","):
        base, slash, step_text = item.partition("/")
        step = _number(step_text, field) if slash else 1
        if base == "*":
            first, last = 0, 6
        elif "-" in base:
            start, _, end = base.partition("-")
            first, last = _weekday(start, field), _weekday(end, field)
        else:
            first = _weekday(base, field)
            last = 6 if slash else first
        if step < 1 or first > last:
            raise ValueError(f"weekday field {field!r} is not a valid range")
        days.update(d % 7 for d in range(first, last + 1, step))
    return ",".join(_WEEKDAYS[d] for d in sorted(days))


def _weekday(token: str, field: str) -> int:
    name = token.lower()[:3]
    if name in _WEEKDAYS:
        return _WEEKDAYS.index(name)
    number = _number(token, field)
    if not 0 <= number <= 7:
        raise ValueError(f"weekday {token!r} in {field!r} is not 0-7 or a day name")
    return number


def _number(token: str, field: str) -> int:
    if not token.isdigit():
        raise ValueError(f"{token!r} in weekday field {field!r} is not a number or a day name")
    return int(token)


def latest_fire_time(trigger: CronTrigger, after: datetime, now: datetime) -> datetime | None:
    """The last time in (after, now] the trigger fires at, or None.

    Missed firings coalesce into this one. Found by widening a window back from `now` until it holds a
    fire time and then halving it, so a long outage costs a few dozen trigger lookups, not one per miss.
    """
    floor = after + _TICK
    if now < floor:
        return None
    empty, span = now + _TICK, _SECOND
    while True:
        lo = max(now - span, floor)
        if _fires_between(trigger, lo, now):
            break
        if lo == floor:
            return None
        empty, span = lo, span * 2
    # A fire time lies in [lo, now] and none in [empty, now]; fire times are whole seconds.
    while empty - lo > _SECOND:
        mid = lo + (empty - lo) / 2
        if _fires_between(trigger, mid, now):
            lo = mid
        else:
            empty = mid
    return trigger.get_next_fire_time(None, lo)


def _fires_between(trigger: CronTrigger, lo: datetime, hi: datetime) -> bool:
    first = trigger.get_next_fire_time(None, lo)
    return first is not None and first <= hi


def fire_time_text(when: datetime) -> str:
    """As recorded: UTC, to the second, fixed width, so the projection's string comparison is time order."""
    return when.astimezone(UTC).isoformat(timespec="seconds")


# -- schedules as the tables hold them ------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    schedule_id: str
    cron: str
    timezone: str
    goal: str
    workspace: str
    profile: str
    tenant: str
    allowed_effects: tuple[str, ...]
    added_at: str
    removed: bool
    fired: int
    last_fire_time: str | None
    last_task_id: str | None

    @property
    def actor(self) -> str:
        return f"schedule:{self.schedule_id}"

    def trigger(self) -> CronTrigger:
        return cron_trigger(self.cron, self.timezone)

    def next_fire_time(self, now: datetime) -> datetime | None:
        """The next firing after `now`, in the schedule's own time zone."""
        return self.trigger().get_next_fire_time(None, now)

    def watched_since(self) -> datetime:
        """Fire times up to this one are spoken for: fired already, or before the schedule existed."""
        return _parse(self.last_fire_time or self.added_at)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _schedule(found: stored.Added) -> Schedule:
    s = found.schedule
    return Schedule(
        s.schedule_id, s.cron, s.timezone, s.goal, s.workspace, s.profile, s.tenant,
        tuple(s.allowed_effects.split(",")), found.added_at, s.removed_seq is not None, s.fired,
        s.last_fire_time, s.last_task_id,
    )


def load_schedules(conn: Connection, *, include_removed: bool = False) -> list[Schedule]:
    """Schedules in the order they were added; removed ones only when asked."""
    return [_schedule(r) for r in stored.list_schedules(conn, include_removed=include_removed)]


def load_schedule(conn: Connection, schedule_id: str) -> Schedule | None:
    found = stored.load_schedule(conn, schedule_id)
    return None if found is None else _schedule(found)


def unsubmitted(conn: Connection) -> list[Schedule]:
    """Schedules (removed ones too) whose latest firing is recorded but its task is not: a crash between the appends."""
    return [_schedule(r) for r in stored.unsubmitted(conn)]


# -- commands, as pure decisions ------------------------------------------------------------------


def new_schedule_id() -> str:
    return "s-" + secrets.token_hex(4)


def add_schedule(
    cron: str,
    goal: str,
    workspace: Path,
    *,
    profile: str,
    tenant: str,
    allowed_effects: tuple[str, ...],
    timezone: str = "UTC",
    secret_patterns: Sequence[Pattern] = SECRETS,
) -> ScheduleAdded:
    """A new schedule, checked as its firings' tasks will be: a valid cron expression and zone, a goal, a folder.

    A goal holding a secret is refused: a schedule keeps its goal as written, in its own stream, to submit
    it again at each firing, and there is no task yet whose vault could keep the value instead.
    """
    cron = " ".join(cron.split())
    cron_trigger(cron, timezone)
    goal = goal.strip()
    if not goal:
        raise InvalidCommand("a schedule needs a goal: say what each task it submits should do")
    kinds = redacted(goal, secret_patterns)[1]
    if kinds:
        raise InvalidCommand(
            f"the schedule's goal holds a secret ({', '.join(kinds)}), which its log would keep in the clear; "
            "put it in a file in the workspace and have the goal name the file"
        )
    if not workspace.is_dir():
        raise InvalidCommand(f"workspace {workspace} is not a folder")
    unknown = sorted(set(allowed_effects) - set(EFFECTS))
    if unknown:
        raise InvalidCommand(f"unknown effects {unknown}; choose from {', '.join(EFFECTS)}")
    return ScheduleAdded(
        schedule_id=new_schedule_id(),
        cron=cron,
        timezone=timezone,
        goal=goal,
        workspace=str(workspace.resolve()),
        profile=profile,
        tenant=tenant,
        allowed_effects=tuple(sorted(set(allowed_effects) | {"read"})),
    )


def remove_schedule(schedule: Schedule | None, schedule_id: str) -> ScheduleRemoved:
    if schedule is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    if schedule.removed:
        raise InvalidCommand(f"schedule {schedule_id} was already removed")
    return ScheduleRemoved(schedule_id=schedule_id)


# -- firing ----------------------------------------------------------------------------------------


def fire_due(store: EventStore, schedule_id: str, now: datetime) -> str | None:
    """Record the schedule's latest fire time in (last firing, now] and submit its task.

    Returns the new task's id, or None when nothing is due: not due yet, removed, or another runner
    recorded this firing first. Safe to call from any number of runners and processes at once.

    Two appends, in this order:
      1. `ScheduleFired(schedule_id, fire_time, task_id)` on the `schedules` stream, with the version
         of that stream read in the same snapshot as the schedule's last fire time. The fire time must
         be later than the last (the projection checks it too), so when runners race for one firing
         one append wins; the others conflict, read again and find nothing due.
      2. `TaskSubmitted` on the new task's stream with `expected_version=0` and actor
         `schedule:<id>`. The task id is fixed by step 1, so submitting one firing twice is a conflict.
    If a process dies between the two, the firing is in the log and its task is not: `complete_firing`
    submits it when a runner starts or refreshes, and before the schedule's next firing is recorded,
    so only a schedule's latest firing can ever lack its task. No firing lost, none doubled.
    """
    for _ in range(FIRE_RETRIES):
        with store.reading() as conn:
            version = stream_version(conn, SCHEDULES_STREAM)
            schedule = load_schedule(conn, schedule_id)
        if schedule is None or schedule.removed:
            return None
        complete_firing(store, schedule)
        due = latest_fire_time(schedule.trigger(), schedule.watched_since(), now)
        if due is None:
            return None
        try:
            # Built first: a schedule whose workspace has gone skips the firing instead of recording one it cannot keep.
            submitted = _task_events(schedule)
        except InvalidCommand as e:
            log.error("schedule cannot submit its task", schedule_id=schedule_id, error=str(e))
            return None
        task_id = new_task_id()
        fired = ScheduleFired(schedule_id=schedule_id, fire_time=fire_time_text(due), task_id=task_id)
        try:
            store.append(SCHEDULES_STREAM, [fired], expected_version=version, actor=schedule.actor)
        except ConcurrencyConflict:
            continue
        _submit(store, schedule, task_id, submitted)
        return task_id
    log.warning("schedule firing left to another runner after repeated conflicts", schedule_id=schedule_id)
    return None


def complete_firing(store: EventStore, schedule: Schedule) -> bool:
    """Submit the task of the schedule's latest firing if a crash left it out; True if this call submitted it."""
    if schedule.last_task_id is None or store.stream_version(schedule.last_task_id) != 0:
        return False
    try:
        submitted = _task_events(schedule)
    except InvalidCommand as e:
        log.error("schedule cannot submit the task of a recorded firing", schedule_id=schedule.schedule_id,
                  task_id=schedule.last_task_id, error=str(e))
        return False
    log.info("submitting the task of a recorded firing that lacks it", schedule_id=schedule.schedule_id,
             task_id=schedule.last_task_id, fire_time=schedule.last_fire_time)
    return _submit(store, schedule, schedule.last_task_id, submitted)


def _task_events(schedule: Schedule):
    return submit_task(
        schedule.goal, Path(schedule.workspace), tenant=schedule.tenant, profile=schedule.profile,
        allowed_effects=schedule.allowed_effects,
    )


def _submit(store: EventStore, schedule: Schedule, task_id: str, submitted) -> bool:
    try:
        store.append(task_id, submitted, expected_version=NO_STREAM, actor=schedule.actor)
    except ConcurrencyConflict:
        return False  # another runner completed this firing first
    return True


# -- the runner -------------------------------------------------------------------------------------


class ScheduleRunner:
    """Fires the schedules in agentd's tables, with APScheduler 3 as the timer.

    Schedules live in agentd's own tables, never in APScheduler's job store: APScheduler only says
    when to look, from its default in-memory store, rebuilt from the tables at every start. So
    schedules survive restarts, and any number of processes can watch the same ones.

    `start` completes firings a crash left without their task, registers every live schedule with an
    `AsyncIOScheduler` (in-memory job store, `coalesce=True`) and fires once for any fire time missed
    while no runner watched. `refresh` (every `refresh_s` under `run`) does the same for schedules
    added or removed by another process since. Every firing goes through `fire_due`, so two runners,
    in one process or two, never record or submit one firing twice.

    Missed firings coalesce, like APScheduler's `coalesce=True`: after a stop a schedule fires once,
    for the latest fire time that passed while nobody watched, not once per missed time. A new
    schedule never fires for times before it was added.

    `clock` is "now" for deciding what is due; APScheduler's timer itself follows the wall clock.
    """

    def __init__(
        self, store: EventStore, *, clock: Callable[[], datetime] | None = None, refresh_s: float = REFRESH_S
    ) -> None:
        self.store = store
        self.clock = clock or (lambda: datetime.now(UTC))
        self.refresh_s = refresh_s
        self._scheduler: AsyncIOScheduler | None = None
        self._registered: set[str] = set()
        self._in_flight: set[asyncio.Task] = set()

    async def __aenter__(self) -> ScheduleRunner:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def run(self) -> None:
        """Start, then refresh every `refresh_s` until cancelled; stop on the way out.

        The first look is tried like every later one: a database that is locked or full as the
        daemon starts delays the schedules; it does not stop the daemon."""
        self._start_timer()
        try:
            while True:
                try:
                    await self.refresh()
                except Exception:  # noqa: BLE001  a failed look (a locked database, say) is tried again next time
                    log.exception("schedule refresh failed")
                await anyio.sleep(self.refresh_s)
        finally:
            with anyio.CancelScope(shield=True):
                await self.stop()

    async def start(self) -> None:
        self._start_timer()
        await self.refresh()

    def _start_timer(self) -> None:
        if self._scheduler is not None:
            raise RuntimeError("this ScheduleRunner is already started")
        self._scheduler = AsyncIOScheduler(
            timezone=UTC,
            # Late is better than never: a firing delayed by a busy loop still happens, once.
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._scheduler.start()

    async def refresh(self) -> None:
        """Pick up schedules added or removed since the last look, and firings still missing their task."""
        if self._scheduler is None:
            raise RuntimeError("start the ScheduleRunner first")
        live, incomplete = await anyio.to_thread.run_sync(self._read)
        for schedule in incomplete:
            await anyio.to_thread.run_sync(complete_firing, self.store, schedule)
        ids = {s.schedule_id for s in live}
        for schedule_id in self._registered - ids:
            self._scheduler.remove_job(schedule_id)
            self._registered.discard(schedule_id)
            log.info("schedule unregistered", schedule_id=schedule_id)
        for schedule in live:
            if schedule.schedule_id not in self._registered:
                await self._register(schedule)

    def _read(self) -> tuple[list[Schedule], list[Schedule]]:
        with self.store.reading() as conn:
            return load_schedules(conn), unsubmitted(conn)

    async def _register(self, schedule: Schedule) -> None:
        assert self._scheduler is not None
        try:
            trigger = schedule.trigger()
        except InvalidCommand as e:
            log.error("schedule cannot be registered", schedule_id=schedule.schedule_id, error=str(e))
            return
        self._scheduler.add_job(
            self._fire, trigger, args=(schedule.schedule_id,), id=schedule.schedule_id,
            name=f"schedule {schedule.schedule_id}", replace_existing=True,
        )
        self._registered.add(schedule.schedule_id)
        log.info(
            "schedule registered", schedule_id=schedule.schedule_id, cron=schedule.cron, timezone=schedule.timezone
        )
        # Whatever fell due while no runner watched: one firing, for the latest time.
        await self._fire(schedule.schedule_id)

    async def _fire(self, schedule_id: str) -> None:
        # APScheduler's shutdown cancels the jobs it is running, but a cancel cannot stop the append
        # already under way in a worker thread: it would land after stop() returned. The firing runs
        # as its own task, out of the cancel's reach, and stop() waits for it.
        work = asyncio.ensure_future(self._fire_now(schedule_id))
        self._in_flight.add(work)
        work.add_done_callback(self._in_flight.discard)
        await asyncio.shield(work)

    async def _fire_now(self, schedule_id: str) -> None:
        try:
            task_id = await anyio.to_thread.run_sync(lambda: fire_due(self.store, schedule_id, self.clock()))
        except AgentdError as e:
            log.error("schedule firing failed", schedule_id=schedule_id, error=str(e))
            return
        if task_id is not None:
            log.info("schedule fired", schedule_id=schedule_id, task_id=task_id)

    async def stop(self) -> None:
        """Stop the timer and wait for firings in progress to finish their appends."""
        if self._scheduler is None:
            return
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        self._scheduler = None
        self._registered.clear()
        # The shutdown is queued on the loop; let it run before waiting for what it may have started.
        await asyncio.sleep(0)
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)

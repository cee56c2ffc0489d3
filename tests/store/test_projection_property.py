"""For any sequence of task and harness events, the live projections equal the pure fold of the log, and
replay agrees: tasks, tool calls, approvals and artifacts, and the queue, jobs and schedules."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from store import EventStore, log
from store.calls import ToolCall
from store.events import (
    NOTIFICATIONS_STREAM,
    SCHEDULES_STREAM,
    AdmittedNotification,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ArtifactDeleted,
    ArtifactRead,
    ArtifactWritten,
    FileChanged,
    FileRestored,
    JobFinished,
    JobStarted,
    ModelCalled,
    NotificationEnqueued,
    NotificationsAdmitted,
    ScheduleAdded,
    ScheduleFired,
    ScheduleRemoved,
    SkillActivated,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    TestsRan,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)
from store.replay import verify
from store.state import Schedule, fold_all
from store.tables import schedules, tool_calls

PATHS = ["a.py", "b.py", "docs/c.md"]
HEX = "0123456789abcdef"

step = st.tuples(
    st.integers(0, 3),  # which task
    st.sampled_from(
        ["phase", "model", "propose", "start", "execute", "request", "grant", "deny", "read", "write", "delete",
         "change", "restore", "tests", "skill", "notify", "admit", "job", "job_end", "schedule", "fire", "unschedule"]
    ),
    st.integers(0, 10_000),  # a number the event uses for its fields
    st.booleans(),  # end this append here (so batches of every size happen)
)


class Model:
    """Just enough state to make every generated event one the store accepts."""

    def __init__(self) -> None:
        self.pending: dict[str, list[str]] = {}
        self.approvals = 0
        self.queued: dict[str, list[str]] = {}
        self.notifications = 0
        self.running: dict[str, list[str]] = {}
        self.jobs = 0
        self.schedules: list[str] = []
        self.fired: dict[str, int] = {}
        self.made_schedules = 0
        # Per task, the calls proposed and without a result: [call id, tool, started, idempotent].
        self.calls: dict[str, list[list]] = {}
        self.proposed = 0

    def system_event(self, task: str, kind: str, n: int):
        """(stream, event) for the harness kinds that are recorded outside the task's stream, else None."""
        if kind == "notify":
            self.notifications += 1
            nid = f"n-{self.notifications}"
            self.queued.setdefault(task, []).append(nid)
            return NOTIFICATIONS_STREAM, NotificationEnqueued(
                notification_id=nid, source="operator", kind="note", tasks=(task,), text=f"note {n}",
                dedupe_key=f"k{n % 2}" if n % 3 else None,
            )
        if kind == "schedule":
            self.made_schedules += 1
            sid = f"s-{self.made_schedules}"
            self.schedules.append(sid)
            return SCHEDULES_STREAM, ScheduleAdded(schedule_id=sid, cron="* * * * *", goal=f"g{n}", workspace="/w")
        if kind == "fire" and self.schedules:
            sid = self.schedules[n % len(self.schedules)]
            self.fired[sid] = self.fired.get(sid, 0) + 1
            return SCHEDULES_STREAM, ScheduleFired(
                schedule_id=sid, fire_time=f"2026-01-01T00:{self.fired[sid]:02d}:00Z", task_id=task
            )
        if kind == "unschedule" and self.schedules:
            return SCHEDULES_STREAM, ScheduleRemoved(schedule_id=self.schedules.pop(n % len(self.schedules)))
        return None

    def event(self, task: str, kind: str, n: int):
        pending = self.pending.setdefault(task, [])
        if kind == "admit" and self.queued.get(task):
            waiting = self.queued.pop(task)
            # The first waiting one stands for the rest, as a coalesced dedupe key would.
            items = [AdmittedNotification(
                notification_id=waiting[-1], source="operator", kind="note", text="n", coalesced=tuple(waiting[:-1])
            )] if n % 2 else [
                AdmittedNotification(notification_id=nid, source="operator", kind="note", text="n") for nid in waiting
            ]
            return NotificationsAdmitted(call_index=n % 7 + 1, items=tuple(items))
        if kind == "job":
            self.jobs += 1
            self.running.setdefault(task, []).append(f"j-{self.jobs}")
            return JobStarted(job_id=f"j-{self.jobs}", call_id=f"c{n}", command=f"sleep {n}")
        if kind == "job_end" and self.running.get(task):
            job_id = self.running[task].pop(n % len(self.running[task]))
            return JobFinished(job_id=job_id, exit_code=n % 3 or None, output_ref=None if n % 2 else f"sha256:{n}")
        if kind == "phase":
            return TaskPhaseChanged(phase=list(TaskPhase)[n % len(TaskPhase)], reason=f"r{n}")
        if kind == "model":
            return ModelCalled(call_index=n + 1, model="m", prompt_tokens=n, completion_tokens=n % 97)
        if kind == "propose":
            self.proposed += 1
            call = [f"c{self.proposed}", ["read_file", "shell"][n % 2], False, False]
            self.calls.setdefault(task, []).append(call)
            return ToolCallProposed(call_id=call[0], tool=call[1], arguments={"path": PATHS[n % 3]})
        open_calls = self.calls.get(task)
        if kind == "start" and open_calls:
            call = open_calls[n % len(open_calls)]
            if call[2] and not call[3]:
                return None  # started and not idempotent: only an approval to run it again lets it start
            call[2:] = [True, n % 2 == 0]
            return ToolCallStarted(call_id=call[0], tool=call[1], idempotent=call[3])
        if kind == "execute" and open_calls:
            call_id, tool, _, _ = open_calls.pop(n % len(open_calls))
            return ToolCallExecuted(call_id=call_id, tool=tool, status=["ok", "error"][n % 2])
        if kind == "request":
            self.approvals += 1
            approval_id = f"ap-{self.approvals}"
            pending.append(approval_id)
            return ApprovalRequested(
                approval_id=approval_id, call_id=f"c{n}", tool="shell", arguments_hash=HEX[n % 16] * 64
            )
        if kind in ("grant", "deny") and pending:
            approval_id = pending.pop(n % len(pending))
            if kind == "grant":
                return ApprovalGranted(approval_id=approval_id, by=f"user{n % 3}")
            return ApprovalDenied(approval_id=approval_id, by=f"user{n % 3}", reason=f"no {n}")
        if kind == "read":
            return ArtifactRead(path=PATHS[n % 3], sha256=HEX[n % 16] * 64, size=n)
        if kind == "write":
            return ArtifactWritten(path=PATHS[n % 3], sha256=HEX[(n + 1) % 16] * 64, size=n + 1)
        if kind == "delete":
            return ArtifactDeleted(path=PATHS[n % 3])
        if kind == "change":
            before = None if n % 3 == 0 else HEX[n % 16] * 64
            after = None if n % 3 == 1 else HEX[(n + 1) % 16] * 64
            return FileChanged(
                call_id=f"c{n % 5}", path=PATHS[n % 3], before_sha256=before, after_sha256=after,
                before_size=None if before is None else n, after_size=None if after is None else n + 1,
            )
        if kind == "restore":
            return FileRestored(
                restore_id=f"r-{n % 3}", kind="undo" if n % 2 else "redo", path=PATHS[n % 3],
                from_sha256=HEX[n % 16] * 64, to_sha256=None if n % 4 == 0 else HEX[(n + 2) % 16] * 64,
            )
        if kind == "tests":
            return TestsRan(command="pytest", status=["passed", "failed", "error"][n % 3], paths=tuple(PATHS[: n % 4]))
        if kind == "skill":
            return SkillActivated(call_index=n % 5, name=f"skill-{n % 3}", content_hash=HEX[n % 16] * 64,
                                  folder=f"/skills/skill-{n % 3}", body=f"Do step {n}.")
        return None


@pytest.fixture(scope="module")
def template_db():
    """A migrated empty database, copied per example: migrating each time would dominate the run."""
    folder = Path(tempfile.mkdtemp())
    EventStore(f"sqlite:///{folder / 'template.db'}").close()
    yield folder / "template.db"
    shutil.rmtree(folder)


# Every harness kind at least once, in an order that lets each change something: random sequences
# reach a job's end or a coalesced admission only now and then.
EVERY_HARNESS_KIND = [
    (0, "notify", 4, False), (0, "notify", 5, True), (1, "notify", 2, True), (0, "admit", 1, True),
    (1, "admit", 2, True), (0, "job", 7, False), (0, "job_end", 2, True), (1, "job", 8, True),
    (2, "schedule", 1, True), (2, "fire", 0, True), (2, "fire", 0, True), (2, "unschedule", 0, True),
    (3, "request", 3, False), (3, "deny", 0, True),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, max_size=60))
@example(steps=EVERY_HARNESS_KIND)
def test_projections_equal_the_fold_of_the_log_for_any_event_sequence(steps, template_db: Path) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        shutil.copy(template_db, folder / "x.db")
        with EventStore(f"sqlite:///{folder / 'x.db'}") as store:
            model = Model()
            submitted: set[str] = set()
            batch: dict[str, list] = {}

            def flush(task: str) -> None:
                if batch.get(task):
                    store.append(task, batch.pop(task))

            for index, kind, n, end in steps:
                task = f"t-{index}"
                if task not in submitted:
                    submitted.add(task)
                    batch.setdefault(task, []).append(TaskSubmitted(goal=f"goal {index}", workspace="/w"))
                system = model.system_event(task, kind, n)
                if system is not None:
                    # After the task's own pending events: a notification may only name a task that exists.
                    flush(task)
                    store.append(system[0], [system[1]])
                    continue
                event = model.event(task, kind, n)
                if event is not None:
                    batch.setdefault(task, []).append(event)
                if end:
                    flush(task)
            for task in list(batch):
                flush(task)

            with store.reading() as conn:
                records = list(log.iter_records(conn))
                folded = fold_all(records)
                verify(conn, f"sqlite:///{folder / 'rebuilt.db'}")
                live_schedules = {
                    row.schedule_id: Schedule(*(getattr(row, f) for f in Schedule._fields))
                    for row in conn.execute(schedules.select())
                }
                live_calls = {(row[0], row[1]): ToolCall(*row[1:]) for row in conn.execute(tool_calls.select())}
            states = folded.states()
            assert set(states) == submitted
            for task, state in states.items():
                assert store.task(task) == state
                last = records[-1].seq if records else 0
                assert store.task_at(task, last) == state
            assert live_schedules == folded.schedules
            assert live_calls == folded.calls
    finally:
        shutil.rmtree(folder)

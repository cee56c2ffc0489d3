"""Projections of the harness: the notification queue, schedules and background jobs.

Like the task projection, each request is checked in memory before anything is written, and refused
whole: a notification admitted twice, a schedule firing the same time twice, a job finishing twice
are errors in the append, not rows quietly overwritten. That is what makes "exactly once" a property
of the store rather than of the code that drains the queue.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Connection, bindparam, select

from store import rules
from store.errors import StoreError
from store.events import (
    NotificationEnqueued,
    Recorded,
    ScheduleAdded,
    ScheduleFired,
    ScheduleRemoved,
)
from store.sql import Statement
from store.state import Admission, JobBegan, JobEnded, schedule_added
from store.tables import jobs, notification_targets as targets, notifications, schedules

SYSTEM_EVENTS = (NotificationEnqueued, ScheduleAdded, ScheduleRemoved, ScheduleFired)

_notification_exists = Statement(
    select(notifications.c.notification_id).where(notifications.c.notification_id == bindparam("id"))
)
_target_state = Statement(
    select(targets.c.admitted_call, targets.c.coalesced_into).where(
        targets.c.task_id == bindparam("task"), targets.c.notification_id == bindparam("id")
    )
)
_schedule_state = Statement(
    select(schedules.c.removed_seq, schedules.c.last_fire_time).where(schedules.c.schedule_id == bindparam("id"))
)
_job_state = Statement(select(jobs.c.finished_seq).where(jobs.c.job_id == bindparam("id")))
_insert_notification = Statement(notifications.insert())
_insert_target = Statement(targets.insert())
_admit = Statement(
    targets.update()
    .where(targets.c.task_id == bindparam("b_task"), targets.c.notification_id == bindparam("b_id"))
    .values(
        admitted_call=bindparam("admitted_call"),
        admitted_seq=bindparam("admitted_seq"),
        coalesced_into=bindparam("coalesced_into"),
    )
)
_insert_schedule = Statement(schedules.insert())
_remove_schedule = Statement(
    schedules.update().where(schedules.c.schedule_id == bindparam("b_id")).values(removed_seq=bindparam("seq"))
)
_fire_schedule = Statement(
    schedules.update()
    .where(schedules.c.schedule_id == bindparam("b_id"))
    .values(fired=schedules.c.fired + 1, last_fire_time=bindparam("fire_time"), last_task_id=bindparam("task"))
)
_insert_job = Statement(jobs.insert())
_finish_job = Statement(
    jobs.update()
    .where(jobs.c.job_id == bindparam("b_id"))
    .values(finished_seq=bindparam("seq"), exit_code=bindparam("exit_code"), output_ref=bindparam("output_ref"))
)

PENDING = rules.PENDING


@dataclass
class HarnessStage:
    """What the harness events of a batch will write, and the states they were checked against."""

    conn: Connection
    notification_ids: dict[str, bool] = field(default_factory=dict)
    target_states: dict[tuple[str, str], tuple] = field(default_factory=dict)
    schedule_states: dict[str, tuple] = field(default_factory=dict)
    job_states: dict[str, bool] = field(default_factory=dict)
    writes: list[tuple[Statement, dict]] = field(default_factory=list)

    # -- lookups, each cached for the batch ----------------------------------------------------

    def _notification_known(self, nid: str) -> bool:
        if nid not in self.notification_ids:
            self.notification_ids[nid] = _notification_exists.scalar(self.conn, {"id": nid}) is not None
        return self.notification_ids[nid]

    def _target(self, task: str, nid: str) -> tuple | None:
        key = (task, nid)
        if key not in self.target_states:
            row = _target_state.execute(self.conn, {"task": task, "id": nid}).fetchone()
            self.target_states[key] = None if row is None else tuple(row)
        return self.target_states[key]

    def _schedule(self, sid: str) -> tuple | None:
        if sid not in self.schedule_states:
            row = _schedule_state.execute(self.conn, {"id": sid}).fetchone()
            self.schedule_states[sid] = None if row is None else tuple(row)
        return self.schedule_states[sid]

    def _job_finished(self, jid: str) -> bool | None:
        """None: no such job; False: running; True: finished."""
        if jid not in self.job_states:
            row = _job_state.execute(self.conn, {"id": jid}).fetchone()
            self.job_states[jid] = None if row is None else row[0] is not None
        return self.job_states[jid]

    # -- staging ---------------------------------------------------------------------------------

    def stage(self, records: list[tuple[Recorded, object]], task_exists: Callable[[str], bool]) -> None:
        """Check one request's harness events and their task-side changes; stage all or raise.

        `task_exists` must see tasks submitted earlier in the same request or batch, not only the table.
        """
        self.task_exists = task_exists
        saved = (
            dict(self.notification_ids), dict(self.target_states), dict(self.schedule_states),
            dict(self.job_states), len(self.writes),
        )
        try:
            for rec, change in records:
                if change is None:
                    self._system(rec)
                else:
                    self._task_change(rec, change)
        except StoreError:
            self.notification_ids, self.target_states, self.schedule_states, self.job_states = saved[:4]
            del self.writes[saved[4]:]
            raise

    def _system(self, rec: Recorded) -> None:
        e = rec.event
        if isinstance(e, NotificationEnqueued):
            unknown = [t for t in e.tasks if not self.task_exists(t)]
            known = self._notification_known(e.notification_id)
            rules.notification_enqueued(known, unknown, e.notification_id, rec.seq)
            self.notification_ids[e.notification_id] = True
            self.writes.append((_insert_notification, dict(
                notification_id=e.notification_id, seq=rec.seq, source=e.source, kind=e.kind, text=e.text,
                payload=json.dumps(e.payload, sort_keys=True), dedupe_key=e.dedupe_key, enqueued_at=rec.recorded_at,
            )))
            for task in dict.fromkeys(e.tasks):
                self.target_states[(task, e.notification_id)] = PENDING
                self.writes.append((_insert_target, dict(
                    task_id=task, notification_id=e.notification_id, enqueued_seq=rec.seq,
                    admitted_call=None, admitted_seq=None, coalesced_into=None,
                )))
        elif isinstance(e, ScheduleAdded):
            rules.schedule_added(self._schedule(e.schedule_id), e.schedule_id, rec.seq)
            self.schedule_states[e.schedule_id] = (None, None)
            self.writes.append((_insert_schedule, schedule_added(rec)._asdict()))
        elif isinstance(e, ScheduleRemoved):
            state = rules.schedule_live(self._schedule(e.schedule_id), e.schedule_id, rec.seq)
            self.schedule_states[e.schedule_id] = (rec.seq, state[1])
            self.writes.append((_remove_schedule, {"b_id": e.schedule_id, "seq": rec.seq}))
        elif isinstance(e, ScheduleFired):
            rules.schedule_fired(self._schedule(e.schedule_id), e.schedule_id, e.fire_time, rec.seq)
            self.schedule_states[e.schedule_id] = (None, e.fire_time)
            self.writes.append((_fire_schedule, {"b_id": e.schedule_id, "fire_time": e.fire_time, "task": e.task_id}))

    def _task_change(self, rec: Recorded, change: object) -> None:
        task = rec.stream_id
        if isinstance(change, Admission):
            for nid, coalesced in change.items:
                for member, into in ((nid, None), *((c, nid) for c in coalesced)):
                    rules.notification_admitted(self._target(task, member), task, member, rec.seq)
                    self.target_states[(task, member)] = (change.call_index, into)
                    self.writes.append((_admit, {
                        "b_task": task, "b_id": member, "admitted_call": change.call_index,
                        "admitted_seq": change.seq, "coalesced_into": into,
                    }))
        elif isinstance(change, JobBegan):
            rules.job_started(self._job_finished(change.job_id), change.job_id, rec.seq)
            self.job_states[change.job_id] = False
            self.writes.append((_insert_job, dict(
                job_id=change.job_id, task_id=task, call_id=change.call_id, command=change.command,
                started_seq=change.seq, finished_seq=None, exit_code=None, output_ref=None,
            )))
        elif isinstance(change, JobEnded):
            rules.job_finished(self._job_finished(change.job_id), change.job_id, rec.seq)
            self.job_states[change.job_id] = True
            self.writes.append((_finish_job, {
                "b_id": change.job_id, "seq": change.seq, "exit_code": change.exit_code,
                "output_ref": change.output_ref,
            }))

    def flush(self) -> None:
        for statement, values in self.writes:
            statement.execute(self.conn, values)
        self.writes = []


HARNESS_CHANGES = (Admission, JobBegan, JobEnded)

"""The SQL projections: task state and the artifact index, written in the append's own transaction."""

from __future__ import annotations

from typing import Mapping, Sequence

from sqlalchemy import Connection, bindparam, func, select

from store import calls, memory_projection, rules
from store.calls import ToolCall
from store.events import Recorded
from store.harness_projection import HARNESS_CHANGES, SYSTEM_EVENTS, HarnessStage
from store.sql import RowInsert, Statement
from store.state import (
    CHANGES,
    TASK_EVENTS,
    Action,
    Approval,
    ApprovalDecided,
    Artifact,
    Change,
    Job,
    Queued,
    TaskState,
    TaskSummary,
    TestsRecorded,
    evolve,
)
from store.tables import (
    approvals,
    artifacts,
    jobs,
    memories,
    notification_targets as targets,
    notifications,
    task_actions,
    tasks,
    tool_calls,
)

_SYSTEM_EVENTS = frozenset(SYSTEM_EVENTS)
_HARNESS_CHANGES = frozenset(HARNESS_CHANGES)
_CALL_EVENTS = frozenset(calls.CALL_EVENTS)
_TASK_EVENTS = frozenset(TASK_EVENTS)
_MEMORY_EVENTS = frozenset(memory_projection.MEMORY_EVENTS)


SUMMARY_FIELDS = TaskSummary._fields
ACTION_FIELDS = Action._fields
APPROVAL_FIELDS = Approval._fields
ARTIFACT_FIELDS = Artifact._fields
# Both child rows are inserted in table column order: the seq, the task, then the rest of the change.
assert tuple(c.name for c in task_actions.columns) == ("seq", "task_id", *ACTION_FIELDS[1:])
assert tuple(c.name for c in artifacts.columns) == ("seq", "task_id", *ARTIFACT_FIELDS[1:])

_load_summary = Statement(select(*[tasks.c[n] for n in SUMMARY_FIELDS]).where(tasks.c.task_id == bindparam("id")))
_insert_task = Statement(tasks.insert())
_update_task = Statement(
    tasks.update()
    .where(tasks.c.task_id == bindparam("b_task_id"))
    .values({n: bindparam(n) for n in SUMMARY_FIELDS if n != "task_id"})
)
_insert_action = RowInsert(task_actions)
_insert_artifact = RowInsert(artifacts)
_insert_approval = Statement(approvals.insert())
_approval_state = Statement(
    select(approvals.c.task_id, approvals.c.status, approvals.c.call_id).where(
        approvals.c.approval_id == bindparam("id")
    )
)
CALL_FIELDS = ToolCall._fields
assert tuple(c.name for c in tool_calls.columns) == ("task_id", *CALL_FIELDS)
_load_call = Statement(
    select(*[tool_calls.c[n] for n in CALL_FIELDS]).where(
        tool_calls.c.task_id == bindparam("task"), tool_calls.c.call_id == bindparam("call")
    )
)
_insert_call = RowInsert(tool_calls)
_update_call = Statement(
    tool_calls.update()
    .where(tool_calls.c.task_id == bindparam("b_task_id"), tool_calls.c.call_id == bindparam("b_call_id"))
    .values({n: bindparam(n) for n in CALL_FIELDS[1:]})
)
_decide_approval = Statement(
    approvals.update()
    .where(approvals.c.approval_id == bindparam("b_id"))
    .values(
        status=bindparam("status"),
        decided_seq=bindparam("decided_seq"),
        decided_by=bindparam("decided_by"),
        decision_reason=bindparam("decision_reason"),
    )
)
_latest_artifact = Statement(
    select(func.max(artifacts.c.seq)).where(
        artifacts.c.task_id == bindparam("task"),
        artifacts.c.path == bindparam("path"),
        artifacts.c.seq < bindparam("before"),
    )
)
_record_test = Statement(
    artifacts.update()
    .where(artifacts.c.task_id == bindparam("b_task"), artifacts.c.seq == bindparam("b_seq"))
    .values(test_status=bindparam("test_status"), test_seq=bindparam("test_seq"))
)


class Projector:
    """Folds a batch of appends into the projection tables: reads what it needs once, checks each
    request in memory, and writes everything in one go at the end.

    A request that the fold refuses (a task event for a task never submitted, a decision on an approval
    that is not pending) raises from `stage` and leaves nothing staged, so the writer can drop that one
    request and still commit the rest of the batch without savepoints.
    """

    def __init__(self, conn: Connection, known: Mapping[str, TaskSummary | None] | None = None) -> None:
        self.conn = conn
        # Task rows the caller already knows to be current (the writer's cache); read, never written.
        self._known = known or {}
        self._summaries: dict[str, TaskSummary | None] = {}
        self._existing: set[str] = set()
        self._touched: dict[str, None] = {}
        # approval id -> (task id, status), as loaded or as staged; and the call each approval is for
        self._approvals: dict[str, tuple[str, str]] = {}
        self._approval_calls: dict[str, str] = {}
        # (task id, call id) -> the call as staged, or as loaded (None: no row); and which have a row
        self._calls: dict[tuple[str, str], ToolCall | None] = {}
        self._calls_in_table: set[tuple[str, str]] = set()
        self._calls_touched: dict[tuple[str, str], None] = {}
        self._actions: list[tuple] = []
        self._artifacts: list[tuple] = []
        self._in_order: list[tuple[Recorded, Change]] = []
        self._memory: list[Recorded] = []
        self._harness = HarnessStage(conn)

    def _summary(self, task_id: str) -> TaskSummary | None:
        # One cached-statement query per task: cheaper than one IN query for the few tasks of a batch.
        if task_id not in self._summaries:
            found = self._known[task_id] if task_id in self._known else load_summary(self.conn, task_id)
            self._summaries[task_id] = found
            if found is not None:
                self._existing.add(task_id)
        return self._summaries[task_id]

    def _approval(self, approval_id: str) -> tuple[str, str] | None:
        if approval_id not in self._approvals:
            row = _approval_state.execute(self.conn, {"id": approval_id}).fetchone()
            if row is None:
                return None
            self._approvals[approval_id] = (row[0], row[1])
            self._approval_calls[approval_id] = row[2]
        return self._approvals[approval_id]

    def _call(self, key: tuple[str, str]) -> ToolCall | None:
        if key not in self._calls:
            # A task with no row before this batch has no calls in the table (its foreign key): a task
            # submitted together with its steps, as an import or a bulk append writes it, costs no lookup.
            # `_summary` has been asked for the task by the time its call events are staged.
            if key[0] not in self._existing:
                self._calls[key] = None
                return None
            row = _load_call.execute(self.conn, {"task": key[0], "call": key[1]}).fetchone()
            self._calls[key] = None if row is None else ToolCall(*row)
            if row is not None:
                self._calls_in_table.add(key)
        return self._calls[key]

    def stage(self, records: Sequence[Recorded]) -> None:
        """Fold one request's events; all of them are staged, or (on StoreError) none."""
        summaries: dict[str, TaskSummary] = {}
        approvals: dict[str, tuple[str, str]] = {}
        approval_calls: dict[str, str] = {}
        calls_: dict[tuple[str, str], ToolCall] = {}
        actions: list[tuple] = []
        artifacts_: list[tuple] = []
        in_order: list[tuple[Recorded, Change]] = []
        harness: list[tuple[Recorded, Change | None]] = []
        memory: list[Recorded] = []
        # A request's events are nearly always one task's: its summary is carried from event to event in
        # `summary` and put in `summaries` when the stream changes and at the end, not at every event.
        sid = summary = None
        for rec in records:
            event = rec.event
            kind = type(event)
            if kind not in _TASK_EVENTS:
                if kind in _SYSTEM_EVENTS:
                    harness.append((rec, None))
                elif kind in _MEMORY_EVENTS:
                    memory.append(rec)
                continue
            if rec.stream_id != sid:
                if sid is not None:
                    summaries[sid] = summary
                sid = rec.stream_id
                summary = summaries[sid] if sid in summaries else self._summary(sid)
            summary = evolve(summary, rec)
            if kind in _CALL_EVENTS:
                key = (sid, event.call_id)
                calls_[key] = calls.advance(calls_[key] if key in calls_ else self._call(key), rec)
            make = CHANGES.get(kind)
            if make is None:
                continue
            change = make(rec, event)
            if change is None:
                continue
            kind = type(change)
            if kind in _HARNESS_CHANGES:
                harness.append((rec, change))
            elif kind is Action:
                actions.append((change.seq, sid, *change[1:]))
            elif kind is Artifact:
                artifacts_.append((change.seq, sid, *change[1:]))
            else:
                if kind is Approval:
                    known = approvals.get(change.approval_id) or self._approval(change.approval_id)
                    rules.approval_requested(known, change.approval_id, rec.seq)
                    approvals[change.approval_id] = (sid, "pending")
                    approval_calls[change.approval_id] = change.call_id
                elif kind is ApprovalDecided:
                    known = approvals.get(change.approval_id) or self._approval(change.approval_id)
                    rules.approval_decided(known, sid, change.approval_id, rec.seq)
                    approvals[change.approval_id] = (sid, change.status)
                    if change.status == "granted":
                        call_id = approval_calls.get(change.approval_id) or self._approval_calls[change.approval_id]
                        key = (sid, call_id)
                        call = calls.approved(calls_[key] if key in calls_ else self._call(key), change.seq)
                        if call is not None:
                            calls_[key] = call
                in_order.append((rec, change))
        if sid is not None:
            summaries[sid] = summary
        if harness:
            self._harness.stage(harness, lambda t: t in summaries or self._summary(t) is not None)
        self._summaries.update(summaries)
        self._touched.update(dict.fromkeys(summaries))
        self._approvals.update(approvals)
        self._approval_calls.update(approval_calls)
        self._calls.update(calls_)
        self._calls_touched.update(dict.fromkeys(calls_))
        self._actions += actions
        self._artifacts += artifacts_
        self._in_order += in_order
        self._memory += memory

    @property
    def summaries(self) -> Mapping[str, TaskSummary | None]:
        """Every task row this projector read or wrote, as it stands after `flush`."""
        return self._summaries

    def flush(self) -> None:
        """Write everything staged so far."""
        conn = self.conn
        inserted = [self._summaries[t] for t in self._touched if t not in self._existing]
        if inserted:
            _insert_task.executemany_tuples(conn, SUMMARY_FIELDS, inserted)
        updated = [(*self._summaries[t], t) for t in self._touched if t in self._existing]
        if updated:
            _update_task.executemany_tuples(conn, (*SUMMARY_FIELDS, "b_task_id"), updated)
        if self._calls_touched:
            new = [(k[0], *self._calls[k]) for k in self._calls_touched if k not in self._calls_in_table]
            if new:
                _insert_call.insert(conn, new)
            changed = [(*self._calls[k][1:], *k) for k in self._calls_touched if k in self._calls_in_table]
            if changed:
                _update_call.executemany_tuples(conn, (*CALL_FIELDS[1:], "b_task_id", "b_call_id"), changed)
            self._calls_in_table.update(self._calls_touched)
            self._calls_touched.clear()
        if self._actions:
            _insert_action.insert(conn, self._actions)
        if self._artifacts:
            _insert_artifact.insert(conn, self._artifacts)
        # Approvals and test results touch rows that may have been inserted just above: apply in log order.
        for rec, change in self._in_order:
            _apply_change(conn, rec, change)
        self._harness.flush()
        if self._memory:
            memory_projection.apply(conn, self._memory)
        self._existing.update(self._touched)
        self._touched.clear()
        self._actions, self._artifacts, self._in_order, self._memory = [], [], [], []


def apply(conn: Connection, records: Sequence[Recorded]) -> None:
    """Fold `records` (in log order) into the projection tables inside the caller's transaction."""
    projector = Projector(conn)
    projector.stage(records)
    projector.flush()


def _apply_change(conn: Connection, rec: Recorded, change: Change) -> None:
    if isinstance(change, Approval):
        _insert_approval.executemany_tuples(conn, ("task_id", *APPROVAL_FIELDS), [(rec.stream_id, *change)])
    elif isinstance(change, ApprovalDecided):
        _decide_approval.execute(
            conn,
            {
                "b_id": change.approval_id,
                "status": change.status,
                "decided_seq": change.seq,
                "decided_by": change.by,
                "decision_reason": change.reason,
            },
        )
    elif isinstance(change, TestsRecorded):
        for path in change.paths:
            latest = _latest_artifact.scalar(conn, {"task": rec.stream_id, "path": path, "before": change.seq})
            if latest is not None:
                _record_test.execute(
                    conn,
                    {"b_task": rec.stream_id, "b_seq": latest, "test_status": change.status, "test_seq": change.seq},
                )


def load_summary(conn: Connection, task_id: str) -> TaskSummary | None:
    row = _load_summary.execute(conn, {"id": task_id}).fetchone()
    return None if row is None else TaskSummary(*row)


def load_task(conn: Connection, task_id: str) -> TaskState | None:
    """Read one task's projected state back into the same shape the pure fold produces."""
    summary = load_summary(conn, task_id)
    if summary is None:
        return None
    acts = conn.execute(
        select(*[task_actions.c[n] for n in ACTION_FIELDS])
        .where(task_actions.c.task_id == task_id)
        .order_by(task_actions.c.seq)
    )
    apps = conn.execute(
        select(*[approvals.c[n] for n in APPROVAL_FIELDS])
        .where(approvals.c.task_id == task_id)
        .order_by(approvals.c.requested_seq)
    )
    arts = conn.execute(
        select(*[artifacts.c[n] for n in ARTIFACT_FIELDS])
        .where(artifacts.c.task_id == task_id)
        .order_by(artifacts.c.seq)
    )
    queued = conn.execute(
        select(
            notifications.c.notification_id, notifications.c.seq, notifications.c.source, notifications.c.kind,
            notifications.c.text, targets.c.admitted_call, targets.c.admitted_seq, targets.c.coalesced_into,
        )
        .join(targets, targets.c.notification_id == notifications.c.notification_id)
        .where(targets.c.task_id == task_id)
        .order_by(notifications.c.seq)
    )
    started = conn.execute(
        select(*[jobs.c[n] for n in Job._fields]).where(jobs.c.task_id == task_id).order_by(jobs.c.started_seq)
    )
    return TaskState(
        summary,
        tuple(Action(*r) for r in acts),
        tuple(Approval(*r) for r in apps),
        tuple(Artifact(*r) for r in arts),
        tuple(Queued(*r) for r in queued),
        tuple(Job(*r) for r in started),
    )



def clear(conn: Connection) -> None:
    """Empty every projection table (children first, for the foreign keys)."""
    for table in (artifacts, approvals, task_actions, tool_calls, tasks, memories):
        conn.execute(table.delete())


def load_approval(conn: Connection, approval_id: str) -> tuple[str, Approval] | None:
    """(task id, approval) for one approval id, or None."""
    row = conn.execute(
        select(approvals.c.task_id, *[approvals.c[n] for n in APPROVAL_FIELDS]).where(
            approvals.c.approval_id == approval_id
        )
    ).first()
    return None if row is None else (row[0], Approval(*row[1:]))


def list_approvals(conn: Connection, status: str | None = "pending") -> list[tuple[str, Approval]]:
    q = select(approvals.c.task_id, *[approvals.c[n] for n in APPROVAL_FIELDS]).order_by(approvals.c.requested_seq)
    if status is not None:
        q = q.where(approvals.c.status == status)
    return [(row[0], Approval(*row[1:])) for row in conn.execute(q)]

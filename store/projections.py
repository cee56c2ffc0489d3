"""The SQL projections: task state and the artifact index, written in the append's own transaction."""

from __future__ import annotations

from typing import Iterable, Sequence

from sqlalchemy import Connection, bindparam, func, select

from store.errors import StoreError
from store.events import Recorded
from store.sql import RowInsert, Statement
from store.state import (
    Action,
    Approval,
    ApprovalDecided,
    Artifact,
    TaskState,
    TaskSummary,
    TestsRecorded,
    changes,
    evolve,
    is_task_event,
)
from store.tables import ApprovalRow, ArtifactRow, TaskActionRow, TaskRow

tasks = TaskRow.__table__
task_actions = TaskActionRow.__table__
approvals = ApprovalRow.__table__
artifacts = ArtifactRow.__table__

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
_approval_exists = Statement(select(approvals.c.approval_id).where(approvals.c.approval_id == bindparam("id")))
_decide_approval = Statement(
    approvals.update()
    .where(
        approvals.c.approval_id == bindparam("b_id"),
        approvals.c.task_id == bindparam("b_task"),
        approvals.c.status == "pending",
    )
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
    .where(artifacts.c.seq == bindparam("b_seq"))
    .values(test_status=bindparam("test_status"), test_seq=bindparam("test_seq"))
)


def apply(conn: Connection, records: Sequence[Recorded]) -> None:
    """Fold `records` (in log order) into the projection tables inside the caller's transaction."""
    summaries: dict[str, TaskSummary | None] = {}
    existing: set[str] = set()
    new_actions: list[tuple] = []
    new_artifacts: list[tuple] = []
    in_order: list[tuple[Recorded, object]] = []
    for rec in records:
        if not is_task_event(rec):
            continue
        sid = rec.stream_id
        if sid not in summaries:
            found = load_summary(conn, sid)
            if found is not None:
                existing.add(sid)
            summaries[sid] = found
        summaries[sid] = evolve(summaries[sid], rec)
        change = changes(rec)
        if change is None:
            continue
        if isinstance(change, Action):
            new_actions.append((change.seq, sid, *change[1:]))
        elif isinstance(change, Artifact):
            new_artifacts.append((change.seq, sid, *change[1:]))
        else:
            in_order.append((rec, change))
    if not summaries:
        return

    inserted = [s for sid, s in summaries.items() if sid not in existing]
    if inserted:
        _insert_task.executemany_tuples(conn, SUMMARY_FIELDS, inserted)
    updated = [(*s, sid) for sid, s in summaries.items() if sid in existing]
    if updated:
        _update_task.executemany_tuples(conn, (*SUMMARY_FIELDS, "b_task_id"), updated)
    if new_actions:
        _insert_action.insert(conn, new_actions)
    if new_artifacts:
        _insert_artifact.insert(conn, new_artifacts)
    # Approvals and test results touch rows that may have been inserted just above: apply in log order.
    for rec, change in in_order:
        _apply_change(conn, rec, change)


def _apply_change(conn: Connection, rec: Recorded, change: object) -> None:
    if isinstance(change, Approval):
        if _approval_exists.scalar(conn, {"id": change.approval_id}) is not None:
            raise StoreError(f"approval {change.approval_id} was already requested (event {rec.seq})")
        _insert_approval.executemany_tuples(conn, ("task_id", *APPROVAL_FIELDS), [(rec.stream_id, *change)])
    elif isinstance(change, ApprovalDecided):
        cur = _decide_approval.execute(
            conn,
            {
                "b_id": change.approval_id,
                "b_task": rec.stream_id,
                "status": change.status,
                "decided_seq": change.seq,
                "decided_by": change.by,
                "decision_reason": change.reason,
            },
        )
        if cur.rowcount != 1:
            raise StoreError(f"event {rec.seq} decides approval {change.approval_id}, which is not pending")
    elif isinstance(change, TestsRecorded):
        for path in change.paths:
            latest = _latest_artifact.scalar(conn, {"task": rec.stream_id, "path": path, "before": change.seq})
            if latest is not None:
                _record_test.execute(conn, {"b_seq": latest, "test_status": change.status, "test_seq": change.seq})


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
    return TaskState(
        summary,
        tuple(Action(*r) for r in acts),
        tuple(Approval(*r) for r in apps),
        tuple(Artifact(*r) for r in arts),
    )


def list_summaries(conn: Connection, phase: str | None = None, limit: int | None = None) -> list[TaskSummary]:
    q = select(*[tasks.c[name] for name in SUMMARY_FIELDS]).order_by(tasks.c.submitted_at, tasks.c.task_id)
    if phase is not None:
        q = q.where(tasks.c.phase == phase)
    if limit is not None:
        q = q.limit(limit)
    return [TaskSummary(*row) for row in conn.execute(q)]


def clear(conn: Connection) -> None:
    """Empty every projection table (children first, for the foreign keys)."""
    for table in (artifacts, approvals, task_actions, tasks):
        conn.execute(table.delete())

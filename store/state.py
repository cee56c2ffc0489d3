"""Task state as a pure fold of the log: `evolve` for the task's own fields, `changes` for its lists.

The SQL projections and the in-memory fold both interpret exactly these functions, so replaying the
log and reading the live tables must agree; the property tests hold them to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Union

from store import calls, rules
from store.calls import ToolCall
from store.events import (
    AnswerGiven,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ArtifactDeleted,
    ArtifactRead,
    ArtifactWritten,
    CompactionFailed,
    ContentMatched,
    ContextCompacted,
    ContextTrimmed,
    EvidenceRetrieved,
    FileChanged,
    FileRestored,
    JobFinished,
    JobStarted,
    McpToolsPinned,
    ModelCalled,
    NoteTaken,
    NotificationEnqueued,
    NotificationsAdmitted,
    ProposalAccepted,
    ProposalRejected,
    Recorded,
    RestoreFinished,
    RestoreStarted,
    RunInterrupted,
    ScheduleAdded,
    ScheduleFired,
    ScheduleRemoved,
    SkillActivated,
    SkillActivationFailed,
    SkillCatalogPinned,
    TaskEscalated,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    TestsRan,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
    UserSaid,
    WorkspaceSurveyed,
)
from store.summary import TaskSummary

TASK_EVENTS = (
    AnswerGiven,
    CompactionFailed,
    ContextCompacted,
    ContextTrimmed,
    NoteTaken,
    RunInterrupted,
    JobFinished,
    JobStarted,
    NotificationsAdmitted,
    EvidenceRetrieved,
    ProposalAccepted,
    ProposalRejected,
    TaskEscalated,
    ToolCallStarted,
    TaskSubmitted,
    TaskPhaseChanged,
    ModelCalled,
    ToolCallProposed,
    ToolCallExecuted,
    ApprovalRequested,
    ApprovalGranted,
    ApprovalDenied,
    ArtifactRead,
    ArtifactWritten,
    ArtifactDeleted,
    FileChanged,
    FileRestored,
    RestoreStarted,
    RestoreFinished,
    TestsRan,
    SkillCatalogPinned,
    SkillActivated,
    SkillActivationFailed,
    McpToolsPinned,
    UserSaid,
    WorkspaceSurveyed,
    ContentMatched,
)


# Named tuples, not dataclasses: the projections build one per event, and a frozen dataclass costs
# several times as much to create or copy with a changed field.




class Action(NamedTuple):
    seq: int
    call_id: str
    tool: str
    status: str


class Approval(NamedTuple):
    approval_id: str
    call_id: str
    tool: str
    arguments_hash: str
    status: str
    reason: str
    expires_at: str | None
    requested_seq: int
    decided_seq: int | None = None
    decided_by: str | None = None
    decision_reason: str | None = None


class Artifact(NamedTuple):
    """One row of the artifact index. `operation` is read, write, create or delete for what a task's
    tools did (write from logs before changes were kept whole), undo or redo for a file put back.
    `sha256` is the content after, `before_sha256` the content before a change (None: there was none,
    or a log too old to say)."""

    seq: int
    path: str
    operation: str
    sha256: str | None
    size: int | None
    test_status: str | None = None
    test_seq: int | None = None
    before_sha256: str | None = None


class ApprovalDecided(NamedTuple):
    approval_id: str
    status: str
    seq: int
    by: str
    reason: str


class TestsRecorded(NamedTuple):
    paths: tuple[str, ...]
    status: str
    seq: int


class Admission(NamedTuple):
    """Notifications taken into request `call_index`: (notification id, ids coalesced into it) pairs."""

    call_index: int
    seq: int
    items: tuple[tuple[str, tuple[str, ...]], ...]


class JobBegan(NamedTuple):
    job_id: str
    call_id: str
    command: str
    seq: int


class JobEnded(NamedTuple):
    job_id: str
    seq: int
    exit_code: int | None
    output_ref: str | None


class Queued(NamedTuple):
    """One notification for one task: what it says, and the request it was admitted or coalesced into."""

    notification_id: str
    seq: int
    source: str
    kind: str
    text: str
    admitted_call: int | None = None
    admitted_seq: int | None = None
    coalesced_into: str | None = None


class Job(NamedTuple):
    """A background job the task started, and how it ended."""

    job_id: str
    call_id: str
    command: str
    started_seq: int
    finished_seq: int | None = None
    exit_code: int | None = None
    output_ref: str | None = None


class Schedule(NamedTuple):
    """A cron schedule: one row of the `schedules` table."""

    schedule_id: str
    cron: str
    timezone: str
    goal: str
    workspace: str
    profile: str
    tenant: str
    allowed_effects: str
    added_seq: int
    removed_seq: int | None = None
    fired: int = 0
    last_fire_time: str | None = None
    last_task_id: str | None = None


Change = Union[Action, Approval, ApprovalDecided, Artifact, TestsRecorded, Admission, JobBegan, JobEnded]


@dataclass(frozen=True)
class TaskState:
    """Everything the store knows about one task at one point of the log."""

    summary: TaskSummary
    actions: tuple[Action, ...] = ()
    approvals: tuple[Approval, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    notifications: tuple[Queued, ...] = ()
    jobs: tuple[Job, ...] = ()

    @property
    def task_id(self) -> str:
        return self.summary.task_id

    @property
    def phase(self) -> TaskPhase:
        return TaskPhase(self.summary.phase)

    @property
    def pending_approvals(self) -> tuple[Approval, ...]:
        return tuple(a for a in self.approvals if a.status == "pending")

    @property
    def waiting_notifications(self) -> tuple[Queued, ...]:
        return tuple(n for n in self.notifications if n.admitted_call is None)

    @property
    def running_jobs(self) -> tuple[Job, ...]:
        return tuple(j for j in self.jobs if j.finished_seq is None)


_TASK_EVENT_TYPES = frozenset(TASK_EVENTS)
_CALL_EVENTS = frozenset(calls.CALL_EVENTS)


def is_task_event(rec: Recorded) -> bool:
    return type(rec.event) in _TASK_EVENT_TYPES


# Both functions below run once per event on every append and replay; they dispatch on the exact
# event class (each type is its own registered class) and build tuples positionally, for speed:
# tuple.__new__ makes the very tuple a named tuple's constructor would, without the Python-level
# __new__ it runs, which costs about as much again as the rest of the call.
_new = tuple.__new__


def evolve(summary: TaskSummary | None, rec: Recorded) -> TaskSummary:
    """Fold one task event into the task's own fields."""
    e = rec.event
    kind = type(e)
    if kind is TaskSubmitted:
        if summary is not None:
            rules.task_submitted(True, rec.stream_id, rec.seq)
        return TaskSummary(
            task_id=rec.stream_id,
            goal=e.goal,
            workspace=e.workspace,
            tenant=e.tenant,
            phase=TaskPhase.SUBMITTED.value,
            max_steps=e.max_steps,
            max_tokens=e.max_tokens,
            steps=0,
            tokens_used=0,
            test_status=None,
            submitted_at=rec.recorded_at,
            updated_at=rec.recorded_at,
            finished_at=None,
            version=rec.stream_version,
            last_seq=rec.seq,
        )
    if summary is None:
        rules.task_exists(False, rec.stream_id, rec.seq, rec.type)
    s = summary
    phase, finished_at, steps, tokens_used, test_status = s.phase, s.finished_at, s.steps, s.tokens_used, s.test_status
    if kind is ModelCalled:
        steps += 1
        tokens_used += e.prompt_tokens + e.completion_tokens
    elif kind is TaskPhaseChanged:
        phase = e.phase.value
        finished_at = rec.recorded_at if e.phase.finished else None
    elif kind is TestsRan:
        test_status = e.status
    return _new(TaskSummary, (
        s.task_id, s.goal, s.workspace, s.tenant, phase, s.max_steps, s.max_tokens, steps, tokens_used,
        test_status, s.submitted_at, rec.recorded_at, finished_at, rec.stream_version, rec.seq,
    ))


# What each task event adds to or changes in the task's lists, by exact event class: `changes` below,
# and the projector's own loop, which has the class in hand already.
CHANGES = {
    ToolCallExecuted: lambda r, e: _new(Action, (r.seq, e.call_id, e.tool, e.status)),
    ApprovalRequested: lambda r, e: Approval(
        e.approval_id, e.call_id, e.tool, e.arguments_hash, "pending", e.reason, e.expires_at, r.seq
    ),
    ApprovalGranted: lambda r, e: ApprovalDecided(e.approval_id, "granted", r.seq, e.by, ""),
    ApprovalDenied: lambda r, e: ApprovalDecided(e.approval_id, "denied", r.seq, e.by, e.reason),
    ArtifactRead: lambda r, e: _new(Artifact, (r.seq, e.path, "read", e.sha256, e.size, None, None, None)),
    ArtifactWritten: lambda r, e: _new(Artifact, (r.seq, e.path, "write", e.sha256, e.size, None, None, None)),
    ArtifactDeleted: lambda r, e: Artifact(r.seq, e.path, "delete", None, None),
    FileChanged: lambda r, e: _new(Artifact, (
        r.seq, e.path, _operation(e.before_sha256, e.after_sha256), e.after_sha256, e.after_size, None, None,
        e.before_sha256,
    )),
    FileRestored: lambda r, e: Artifact(r.seq, e.path, e.kind, e.to_sha256, None, None, None, e.from_sha256),
    TestsRan: lambda r, e: TestsRecorded(e.paths, e.status, r.seq) if e.paths else None,
    NotificationsAdmitted: lambda r, e: Admission(
        e.call_index, r.seq, tuple((i.notification_id, i.coalesced) for i in e.items)
    ),
    # A skill taken in is one of the task's completed actions, listed with its tool calls.
    SkillActivated: lambda r, e: Action(r.seq, f"c{e.call_index}", f"skill:{e.name}", "activated"),
    JobStarted: lambda r, e: JobBegan(e.job_id, e.call_id, e.command, r.seq),
    JobFinished: lambda r, e: JobEnded(e.job_id, r.seq, e.exit_code, e.output_ref),
}


def _operation(before: str | None, after: str | None) -> str:
    return "create" if before is None else "delete" if after is None else "write"


def changes(rec: Recorded) -> Change | None:
    """What one task event adds to or changes in the task's lists (actions, approvals, artifacts)."""
    make = CHANGES.get(type(rec.event))
    return None if make is None else make(rec, rec.event)


def schedule_added(rec: Recorded) -> Schedule:
    e = rec.event
    return Schedule(
        e.schedule_id, e.cron, e.timezone, e.goal, e.workspace, e.profile, e.tenant, ",".join(e.allowed_effects),
        rec.seq,
    )


@dataclass
class _Builder:
    summary: TaskSummary | None = None
    actions: list[Action] = field(default_factory=list)
    approvals: dict[str, Approval] = field(default_factory=dict)
    artifacts: list[Artifact] = field(default_factory=list)
    notifications: dict[str, Queued] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)

    def build(self) -> TaskState:
        assert self.summary is not None
        return TaskState(
            self.summary, tuple(self.actions), tuple(self.approvals.values()), tuple(self.artifacts),
            tuple(self.notifications.values()), tuple(self.jobs.values()),
        )


class Fold:
    """The in-memory fold of the log: every task's state and the schedules, applying `store.rules`
    exactly as the live projector does, so an append the store refuses is refused here too."""

    def __init__(self, only: str | None = None) -> None:
        # With `only`, the fold sees one task's stream and the notification stream: notifications for
        # other tasks are passed over rather than refused for naming tasks it never saw.
        self.only = only
        self.tasks: dict[str, _Builder] = {}
        self.schedules: dict[str, Schedule] = {}
        # approval id -> (task id, status): approval ids are unique across tasks, as in the table.
        self._approvals: dict[str, tuple[str, str]] = {}
        self._jobs: dict[str, bool] = {}
        self._notifications: set[str] = set()
        # (task id, call id) -> the call, as the `tool_calls` table holds it.
        self.calls: dict[tuple[str, str], ToolCall] = {}

    def apply(self, rec: Recorded) -> None:
        kind = type(rec.event)
        if kind in _TASK_EVENT_TYPES:
            self._task_event(rec)
        elif kind is NotificationEnqueued:
            self._enqueued(rec)
        elif kind in (ScheduleAdded, ScheduleRemoved, ScheduleFired):
            self._schedule(rec)

    def _task_event(self, rec: Recorded) -> None:
        b = self.tasks.get(rec.stream_id) or _Builder()
        b.summary = evolve(b.summary, rec)
        self.tasks[rec.stream_id] = b
        task = rec.stream_id
        if type(rec.event) in _CALL_EVENTS:
            key = (task, rec.event.call_id)
            self.calls[key] = calls.advance(self.calls.get(key), rec)
        change = changes(rec)
        if isinstance(change, Action):
            b.actions.append(change)
        elif isinstance(change, Approval):
            rules.approval_requested(self._approvals.get(change.approval_id), change.approval_id, rec.seq)
            self._approvals[change.approval_id] = (task, "pending")
            b.approvals[change.approval_id] = change
        elif isinstance(change, ApprovalDecided):
            rules.approval_decided(self._approvals.get(change.approval_id), task, change.approval_id, rec.seq)
            self._approvals[change.approval_id] = (task, change.status)
            b.approvals[change.approval_id] = b.approvals[change.approval_id]._replace(
                status=change.status, decided_seq=change.seq, decided_by=change.by, decision_reason=change.reason,
            )
            if change.status == "granted":
                key = (task, b.approvals[change.approval_id].call_id)
                call = calls.approved(self.calls.get(key), change.seq)
                if call is not None:
                    self.calls[key] = call
        elif isinstance(change, Artifact):
            b.artifacts.append(change)
        elif isinstance(change, TestsRecorded):
            for path in change.paths:
                latest = _latest_index(b.artifacts, path)
                if latest is not None:
                    b.artifacts[latest] = b.artifacts[latest]._replace(test_status=change.status, test_seq=change.seq)
        elif isinstance(change, Admission):
            for nid, coalesced in change.items:
                for member, into in ((nid, None), *((c, nid) for c in coalesced)):
                    queued = b.notifications.get(member)
                    prior = None if queued is None else (queued.admitted_call, queued.coalesced_into)
                    rules.notification_admitted(prior, task, member, rec.seq)
                    b.notifications[member] = queued._replace(
                        admitted_call=change.call_index, admitted_seq=change.seq, coalesced_into=into
                    )
        elif isinstance(change, JobBegan):
            rules.job_started(self._jobs.get(change.job_id), change.job_id, rec.seq)
            self._jobs[change.job_id] = False
            b.jobs[change.job_id] = Job(change.job_id, change.call_id, change.command, change.seq)
        elif isinstance(change, JobEnded):
            rules.job_finished(self._jobs.get(change.job_id), change.job_id, rec.seq)
            self._jobs[change.job_id] = True
            b.jobs[change.job_id] = b.jobs[change.job_id]._replace(
                finished_seq=change.seq, exit_code=change.exit_code, output_ref=change.output_ref
            )

    def _enqueued(self, rec: Recorded) -> None:
        e = rec.event
        targets = [t for t in dict.fromkeys(e.tasks) if self.only is None or t == self.only]
        unknown = [t for t in targets if t not in self.tasks]
        rules.notification_enqueued(e.notification_id in self._notifications, unknown, e.notification_id, rec.seq)
        self._notifications.add(e.notification_id)
        for task in targets:
            self.tasks[task].notifications[e.notification_id] = Queued(
                e.notification_id, rec.seq, e.source, e.kind, e.text
            )

    def _schedule(self, rec: Recorded) -> None:
        e = rec.event
        current = self.schedules.get(e.schedule_id)
        prior = None if current is None else (current.removed_seq, current.last_fire_time)
        if isinstance(e, ScheduleAdded):
            rules.schedule_added(prior, e.schedule_id, rec.seq)
            self.schedules[e.schedule_id] = schedule_added(rec)
        elif isinstance(e, ScheduleRemoved):
            rules.schedule_live(prior, e.schedule_id, rec.seq)
            self.schedules[e.schedule_id] = current._replace(removed_seq=rec.seq)
        else:
            rules.schedule_fired(prior, e.schedule_id, e.fire_time, rec.seq)
            self.schedules[e.schedule_id] = current._replace(
                fired=current.fired + 1, last_fire_time=e.fire_time, last_task_id=e.task_id
            )

    def states(self) -> dict[str, TaskState]:
        return {task_id: b.build() for task_id, b in self.tasks.items()}


def _latest_index(artifacts: list[Artifact], path: str) -> int | None:
    for i in range(len(artifacts) - 1, -1, -1):
        if artifacts[i].path == path:
            return i
    return None


def fold(records: Iterable[Recorded]) -> dict[str, TaskState]:
    """The state of every task in `records`, which must be in log order, with its queue and jobs."""
    return fold_all(records).states()


def fold_all(records: Iterable[Recorded], only: str | None = None) -> Fold:
    """Tasks and schedules folded from `records`, in log order (see `Fold` for `only`)."""
    folded = Fold(only)
    for rec in records:
        folded.apply(rec)
    return folded

"""Task state as a pure fold of the log: `evolve` for the task's own fields, `changes` for its lists.

The SQL projections and the in-memory fold both interpret exactly these functions, so replaying the
log and reading the live tables must agree; the property tests hold them to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Union

from store.errors import StoreError
from store.events import (
    AnswerGiven,
    RunInterrupted,
    JobFinished,
    JobStarted,
    NotificationsAdmitted,
    EvidenceRetrieved,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ArtifactDeleted,
    ArtifactRead,
    ArtifactWritten,
    ModelCalled,
    ProposalAccepted,
    ProposalRejected,
    Recorded,
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
    WorkspaceSurveyed,
)

TASK_EVENTS = (
    AnswerGiven,
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
    TestsRan,
    SkillCatalogPinned,
    SkillActivated,
    SkillActivationFailed,
    WorkspaceSurveyed,
)


# Named tuples, not dataclasses: the projections build one per event, and a frozen dataclass costs
# several times as much to create or copy with a changed field.


class TaskSummary(NamedTuple):
    """The task's own fields: one row of the `tasks` table."""

    task_id: str
    goal: str
    workspace: str
    tenant: str
    phase: str
    max_steps: int
    max_tokens: int
    steps: int
    tokens_used: int
    test_status: str | None
    submitted_at: str
    updated_at: str
    finished_at: str | None
    version: int
    last_seq: int


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
    seq: int
    path: str
    operation: str
    sha256: str | None
    size: int | None
    test_status: str | None = None
    test_seq: int | None = None


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


Change = Union[Action, Approval, ApprovalDecided, Artifact, TestsRecorded, Admission, JobBegan, JobEnded]


@dataclass(frozen=True)
class TaskState:
    """Everything the store knows about one task at one point of the log."""

    summary: TaskSummary
    actions: tuple[Action, ...] = ()
    approvals: tuple[Approval, ...] = ()
    artifacts: tuple[Artifact, ...] = ()

    @property
    def task_id(self) -> str:
        return self.summary.task_id

    @property
    def phase(self) -> TaskPhase:
        return TaskPhase(self.summary.phase)

    @property
    def pending_approvals(self) -> tuple[Approval, ...]:
        return tuple(a for a in self.approvals if a.status == "pending")


_TASK_EVENT_TYPES = frozenset(TASK_EVENTS)


def is_task_event(rec: Recorded) -> bool:
    return type(rec.event) in _TASK_EVENT_TYPES


# Both functions below run once per event on every append and replay; they dispatch on the exact
# event class (each type is its own registered class) and build tuples positionally, for speed.


def evolve(summary: TaskSummary | None, rec: Recorded) -> TaskSummary:
    """Fold one task event into the task's own fields."""
    e = rec.event
    kind = type(e)
    if kind is TaskSubmitted:
        if summary is not None:
            raise StoreError(f"task {rec.stream_id} was already submitted (event {rec.seq})")
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
        raise StoreError(f"event {rec.seq} ({rec.type}) is for {rec.stream_id!r}, which is not a submitted task")
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
    return TaskSummary(
        s.task_id, s.goal, s.workspace, s.tenant, phase, s.max_steps, s.max_tokens, steps, tokens_used,
        test_status, s.submitted_at, rec.recorded_at, finished_at, rec.stream_version, rec.seq,
    )


_CHANGES = {
    ToolCallExecuted: lambda r, e: Action(r.seq, e.call_id, e.tool, e.status),
    ApprovalRequested: lambda r, e: Approval(
        e.approval_id, e.call_id, e.tool, e.arguments_hash, "pending", e.reason, e.expires_at, r.seq
    ),
    ApprovalGranted: lambda r, e: ApprovalDecided(e.approval_id, "granted", r.seq, e.by, ""),
    ApprovalDenied: lambda r, e: ApprovalDecided(e.approval_id, "denied", r.seq, e.by, e.reason),
    ArtifactRead: lambda r, e: Artifact(r.seq, e.path, "read", e.sha256, e.size),
    ArtifactWritten: lambda r, e: Artifact(r.seq, e.path, "write", e.sha256, e.size),
    ArtifactDeleted: lambda r, e: Artifact(r.seq, e.path, "delete", None, None),
    TestsRan: lambda r, e: TestsRecorded(e.paths, e.status, r.seq) if e.paths else None,
    NotificationsAdmitted: lambda r, e: Admission(
        e.call_index, r.seq, tuple((i.notification_id, i.coalesced) for i in e.items)
    ),
    # A skill taken in is one of the task's completed actions, listed with its tool calls.
    SkillActivated: lambda r, e: Action(r.seq, f"c{e.call_index}", f"skill:{e.name}", "activated"),
    JobStarted: lambda r, e: JobBegan(e.job_id, e.call_id, e.command, r.seq),
    JobFinished: lambda r, e: JobEnded(e.job_id, r.seq, e.exit_code, e.output_ref),
}


def changes(rec: Recorded) -> Change | None:
    """What one task event adds to or changes in the task's lists (actions, approvals, artifacts)."""
    make = _CHANGES.get(type(rec.event))
    return None if make is None else make(rec, rec.event)


@dataclass
class _Builder:
    summary: TaskSummary | None = None
    actions: list[Action] = field(default_factory=list)
    approvals: dict[str, Approval] = field(default_factory=dict)
    artifacts: list[Artifact] = field(default_factory=list)

    def apply(self, rec: Recorded) -> None:
        self.summary = evolve(self.summary, rec)
        change = changes(rec)
        if isinstance(change, Action):
            self.actions.append(change)
        elif isinstance(change, Approval):
            if change.approval_id in self.approvals:
                raise StoreError(f"approval {change.approval_id} was already requested (event {rec.seq})")
            self.approvals[change.approval_id] = change
        elif isinstance(change, ApprovalDecided):
            current = self.approvals.get(change.approval_id)
            if current is None or current.status != "pending":
                raise StoreError(f"event {rec.seq} decides approval {change.approval_id}, which is not pending")
            self.approvals[change.approval_id] = current._replace(
                status=change.status,
                decided_seq=change.seq,
                decided_by=change.by,
                decision_reason=change.reason,
            )
        elif isinstance(change, Artifact):
            self.artifacts.append(change)
        elif isinstance(change, TestsRecorded):
            for path in change.paths:
                latest = _latest_index(self.artifacts, path)
                if latest is not None:
                    self.artifacts[latest] = self.artifacts[latest]._replace(
                        test_status=change.status, test_seq=change.seq
                    )

    def build(self) -> TaskState:
        assert self.summary is not None
        return TaskState(self.summary, tuple(self.actions), tuple(self.approvals.values()), tuple(self.artifacts))


def _latest_index(artifacts: list[Artifact], path: str) -> int | None:
    for i in range(len(artifacts) - 1, -1, -1):
        if artifacts[i].path == path:
            return i
    return None


def fold(records: Iterable[Recorded]) -> dict[str, TaskState]:
    """The state of every task in `records`, which must be in log order."""
    builders: dict[str, _Builder] = {}
    for rec in records:
        if not is_task_event(rec):
            continue
        builders.setdefault(rec.stream_id, _Builder()).apply(rec)
    return {task_id: b.build() for task_id, b in builders.items()}

"""Every event type agentd records, and the machinery to register and decode them."""

from store.events._base import Event, Recorded, decode, event_class, event_types, upcaster
from store.events.approval import ApprovalDenied, ApprovalGranted, ApprovalRequested
from store.events.artifact import ArtifactDeleted, ArtifactRead, ArtifactWritten, TestsRan
from store.events.call import (
    AnswerGiven,
    ContextManifest,
    EvidenceItem,
    EvidenceRetrieved,
    LeftOut,
    ManifestItem,
    ModelCalled,
    ProposalAccepted,
    ProposalRejected,
    TaskEscalated,
    TokenBuckets,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)
from store.events.notification import (
    NOTIFICATIONS_STREAM,
    AdmittedNotification,
    NotificationEnqueued,
    NotificationsAdmitted,
)
from store.events.schedule import (
    SCHEDULES_STREAM,
    JobFinished,
    JobStarted,
    ScheduleAdded,
    ScheduleFired,
    ScheduleRemoved,
)
from store.events.task import TaskPhase, TaskPhaseChanged, TaskSubmitted

__all__ = [
    "NOTIFICATIONS_STREAM",
    "SCHEDULES_STREAM",
    "AdmittedNotification",
    "AnswerGiven",
    "ApprovalDenied",
    "ApprovalGranted",
    "ApprovalRequested",
    "ArtifactDeleted",
    "ArtifactRead",
    "ArtifactWritten",
    "ContextManifest",
    "Event",
    "EvidenceItem",
    "EvidenceRetrieved",
    "LeftOut",
    "ManifestItem",
    "JobFinished",
    "JobStarted",
    "ModelCalled",
    "NotificationEnqueued",
    "NotificationsAdmitted",
    "ProposalAccepted",
    "ProposalRejected",
    "Recorded",
    "ScheduleAdded",
    "ScheduleFired",
    "ScheduleRemoved",
    "TaskEscalated",
    "TaskPhase",
    "TaskPhaseChanged",
    "TaskSubmitted",
    "TestsRan",
    "TokenBuckets",
    "ToolCallExecuted",
    "ToolCallProposed",
    "ToolCallStarted",
    "decode",
    "event_class",
    "event_types",
    "upcaster",
]

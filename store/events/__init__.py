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
from store.events.task import TaskPhase, TaskPhaseChanged, TaskSubmitted

__all__ = [
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
    "ModelCalled",
    "ProposalAccepted",
    "ProposalRejected",
    "Recorded",
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

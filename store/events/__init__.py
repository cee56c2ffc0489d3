"""Every event type agentd records, and the machinery to register and decode them."""

from store.events._base import Event, Recorded, decode, event_class, event_types, upcaster
from store.events.approval import ApprovalDenied, ApprovalGranted, ApprovalRequested
from store.events.artifact import ArtifactDeleted, ArtifactRead, ArtifactWritten, TestsRan
from store.events.call import ModelCalled, ToolCallExecuted, ToolCallProposed
from store.events.task import TaskPhase, TaskPhaseChanged, TaskSubmitted

__all__ = [
    "ApprovalDenied",
    "ApprovalGranted",
    "ApprovalRequested",
    "ArtifactDeleted",
    "ArtifactRead",
    "ArtifactWritten",
    "Event",
    "ModelCalled",
    "Recorded",
    "TaskPhase",
    "TaskPhaseChanged",
    "TaskSubmitted",
    "TestsRan",
    "ToolCallExecuted",
    "ToolCallProposed",
    "decode",
    "event_class",
    "event_types",
    "upcaster",
]

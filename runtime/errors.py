"""The runtime's errors: settings, the model, tools, commands, each under the one root AgentdError.

Store errors stay in store/errors.py, where the store raises them; everything here is raised above
the store. The CLI prints any AgentdError's message as one line and exits with its `exit_code`.
"""

from __future__ import annotations

from store.errors import AgentdError

__all__ = [
    "AgentdError",
    "ConfigError",
    "ContextOverflow",
    "InferenceError",
    "InstanceLocked",
    "InvalidCommand",
    "ModelFileError",
    "NotFound",
    "PortUnavailable",
    "RecordingMismatch",
    "ToolError",
]


class ConfigError(AgentdError):
    """A setting is missing or has a value agentd cannot use."""

    exit_code = 2


class ModelFileError(AgentdError):
    """The model file is missing, unreadable or not a GGUF file."""


class InstanceLocked(AgentdError):
    """Another agentd already serves this data directory."""


class LeaseLost(AgentdError):
    """Another worker took over the task this process ran: the lease ran out while this process stalled."""


class PortUnavailable(AgentdError):
    """The web page's port cannot be listened on: another program holds it, or it needs privileges."""


class NotFound(AgentdError):
    """A task, event or approval named on the command line does not exist."""


class InvalidCommand(AgentdError):
    """A command is not allowed in the current state (for example, cancelling a finished task)."""


class InferenceError(AgentdError):
    """The model could not produce an answer (it failed, or the endpoint did not respond)."""


class ContextOverflow(AgentdError):
    """What a decision must see does not fit the model's context window; nothing was cut silently."""


class ToolError(AgentdError):
    """A tool call was refused or failed; the message says which and why."""


class RecordingMismatch(AgentdError):
    """Re-running a task against its recorded outputs gave a different request or outcome."""

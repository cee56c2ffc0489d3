"""Events of MCP servers' tools in a task: the tool list it started with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from store.events._base import Event


class PinnedTool(BaseModel):
    """One MCP tool as the task was shown it, and the terms agentd's config gave it then."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    # sha256 of the canonical JSON of name, description and both schemas: what a server may change
    # behind a task's back, compared before every call.
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    effects: tuple[str, ...]
    needs_approval: bool
    scope: str
    timeout_s: float = Field(gt=0)


class McpToolsPinned(Event):
    """The MCP tools a task may be offered, fixed before its first request and kept to its end.

    A server whose list changes later tells the task through the notification queue; the task keeps
    offering these definitions, so its stable prefix never changes, and a call of a tool whose
    definition the server changed since is refused rather than sent.
    """

    tools: tuple[PinnedTool, ...] = ()


# Where the definitions agentd offers are kept: across restarts, a server's changed tool is told from a known one.
MCP_TOOLS_STREAM = "mcp-tools"


class McpToolAccepted(Event):
    """A definition of an MCP tool that agentd offers from now on: the first one its server listed (the
    server is in the config, so its first word is taken), or a changed one a person consented to after
    seeing what changed. A server that lists anything else for the tool has it held back until then."""

    tool: PinnedTool
    by: str = Field(min_length=1)

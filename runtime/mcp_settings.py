"""The [mcp] table of agentd.toml: the MCP servers agentd reaches, and the terms their tools run on.

A server is reached either by running a command (stdio) or at a URL (streamable HTTP). What its
tools may do is agentd's word, not the server's: effects, approval, scope and timeout come from here,
per server and per tool, and default to the most careful terms (external effects, a person's approval).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME = r"^[a-z][a-z0-9_-]{0,31}$"
# A header's value in the config names an environment variable; anything else is a value in clear.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

DEFAULT_EFFECTS: tuple[str, ...] = ("external",)
DEFAULT_SCOPE = "external"
DEFAULT_TIMEOUT_S = 30.0

EffectName = Literal["read", "write", "external"]


class ToolTerms(BaseModel):
    """What a tool may do and how long it may take; unset fields fall back to the server's, then the defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    effects: tuple[EffectName, ...] | None = None
    approval: bool | None = None
    scope: str | None = Field(None, min_length=1)
    timeout_s: float | None = Field(None, gt=0, le=3600)


class Terms(BaseModel):
    """A tool's terms with every fallback applied."""

    model_config = ConfigDict(frozen=True)

    effects: tuple[EffectName, ...]
    approval: bool
    scope: str
    timeout_s: float


class EvidenceTerms(BaseModel):
    """A server's resources and argument-free prompts as evidence: for which tenants, believed how far.

    Read when the server starts, like its tool list; retrieved within the same scope and budget rules
    as the knowledge folder's documents, and fenced as data like them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Who may be shown it: tenant names, or "*" for every tenant. No default: a server's text is for
    # nobody until the config says whom.
    tenants: tuple[str, ...] = Field(min_length=1)
    # As a knowledge document's front matter: policy 1.0, how-to 0.7, forum post 0.3. A server is
    # someone else's text, so less than a policy unless the config says otherwise.
    authority: float = Field(0.5, gt=0, le=1)


class Server(ToolTerms):
    """One server: how to reach it, and the terms of its tools (`tools.NAME` overrides per tool)."""

    command: str | None = Field(None, min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = Field(None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    tools: dict[str, ToolTerms] = Field(default_factory=dict)
    # Its resources and prompts as evidence (`[mcp.servers.NAME.evidence]`); none read without it.
    evidence: EvidenceTerms | None = None

    @field_validator("headers")
    @classmethod
    def _names_not_values(cls, headers: dict[str, str]) -> dict[str, str]:
        # A token written into agentd.toml ends up in backups, diffs and pasted configs; its name does not.
        for header, value in headers.items():
            if not ENV_NAME.fullmatch(value):
                raise ValueError(
                    f"header {header!r} must name an environment variable that holds its value, "
                    "not the value itself"
                )
        return headers

    @model_validator(mode="after")
    def _one_transport(self) -> Server:
        if (self.command is None) == (self.url is None):
            raise ValueError("a server has either `command` (stdio) or `url` (streamable HTTP), exactly one")
        if self.url is not None and (self.args or self.env):
            raise ValueError("`args` and `env` are for a stdio server (`command`), not a `url`")
        if self.command is not None and self.headers:
            raise ValueError("`headers` are for a streamable HTTP server (`url`), not a `command`")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def terms(self, tool: str) -> Terms:
        own = self.tools.get(tool, ToolTerms())
        effects = own.effects if own.effects is not None else self.effects
        return Terms(
            effects=tuple(sorted(set(effects if effects is not None else DEFAULT_EFFECTS))),
            # Approval stays on unless someone turned it off for the server or the tool: whatever its
            # effects, a tool from outside runs at a person's word until told otherwise.
            approval=_first(own.approval, self.approval, True),
            scope=_first(own.scope, self.scope, DEFAULT_SCOPE),
            timeout_s=_first(own.timeout_s, self.timeout_s, DEFAULT_TIMEOUT_S),
        )


class ProfileTools(BaseModel):
    """MCP tools a profile's tasks may be offered, on top of those the profile itself lists, and the
    servers whose resources and prompts its tasks may be shown as evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()


class McpSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, Server] = Field(default_factory=dict)
    profiles: dict[str, ProfileTools] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, Server]) -> dict[str, Server]:
        for name in servers:
            if not re.fullmatch(NAME, name):
                raise ValueError(f"server name {name!r} must be lowercase letters, digits, '-' or '_'")
        return servers

    @model_validator(mode="after")
    def _known_servers(self) -> McpSettings:
        for profile, allowed in self.profiles.items():
            for entry in allowed.tools:
                server = entry.partition("/")[0]
                if "/" not in entry or server not in self.servers:
                    raise ValueError(
                        f"profiles.{profile}.tools: {entry!r} must be SERVER/TOOL or SERVER/* "
                        "with a server of mcp.servers"
                    )
            for server in allowed.evidence:
                if server not in self.servers or self.servers[server].evidence is None:
                    raise ValueError(
                        f"profiles.{profile}.evidence: {server!r} must be a server of mcp.servers with an "
                        f"[mcp.servers.{server}.evidence] table"
                    )
        return self


def _first(*values):
    return next(v for v in values if v is not None)

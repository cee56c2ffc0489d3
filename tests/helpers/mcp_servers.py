"""MCP servers for the tests: the settings that start tests/helpers/mcp_server.py over stdio (or reach
it over HTTP), a gateway opened on them, and a profile that offers their tools."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from runtime.agent.profiles import WORKSPACE, Profile
from runtime.mcp.gateway import Gateway
from runtime.mcp_settings import McpSettings
from runtime.tools import ToolRegistry, builtin_registry
from tests.helpers.repo import REPO

SERVER = REPO / "tests" / "helpers" / "mcp_server.py"
# A value shaped like a real key, in the environment agentd is given under a secret-looking name.
SECRET = "sk-test-4f9a2c7e1b"
ENVIRON = {"PATH": "/usr/bin:/bin", "SUPPORT_API_KEY": SECRET}

# The workspace agent plus every tool of the test server.
MCP_PROFILE = WORKSPACE.model_copy(update={"name": "with-mcp", "mcp_tools": ("test/*",)})


def stdio(*args: str, **terms: Any) -> dict[str, Any]:
    """The config table of the test server over stdio, with `terms` (effects, approval, tools, ...)."""
    return {"command": sys.executable, "args": [str(SERVER), *args], **terms}


def settings(**servers: Mapping[str, Any]) -> McpSettings:
    return McpSettings.model_validate({"servers": dict(servers)})


@contextlib.contextmanager
def opened(
    mcp: McpSettings, registry: ToolRegistry | None = None, *, store=None, environ: Mapping[str, str] = ENVIRON,
    connect_timeout_s: float | None = None,
) -> Iterator[Gateway]:
    """A gateway connected to `mcp`'s servers, its tools in `registry` (the built-in tools by default)."""
    gateway = Gateway(mcp, environ, store=store, connect_timeout_s=connect_timeout_s)
    try:
        gateway.open(builtin_registry() if registry is None else registry)
        yield gateway
    finally:
        gateway.close()


def profiles(*extra: Profile) -> dict[str, Profile]:
    return {p.name: p for p in (MCP_PROFILE, *extra)}


__all__ = ["ENVIRON", "MCP_PROFILE", "SECRET", "SERVER", "opened", "profiles", "settings", "stdio"]

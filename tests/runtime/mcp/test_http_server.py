"""An MCP server over streamable HTTP (the test server run with the SDK's own HTTP transport): its
headers come from agentd's environment by name, and a server that goes away costs one call."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.artifacts import ArtifactStore
from runtime.tools import ToolContext, execute
from tests.helpers import free_port, wait_for_port
from tests.helpers.mcp_servers import SERVER, opened, settings

TOKEN = "Bearer web-token-0123456789"


@pytest.fixture
def http_server():
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield process, f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait(10)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(task_id="t-1", tenant="acme", actor="ann", workspace=tmp_path,
                       artifacts=ArtifactStore(tmp_path / "artifacts"))


def web(url: str):
    return settings(web={"url": url, "headers": {"Authorization": "WEB_TOKEN"}, "approval": False, "timeout_s": 5})


def test_a_header_is_sent_with_the_value_of_the_variable_it_names(http_server, ctx) -> None:
    _, url = http_server
    with opened(web(url), environ={"WEB_TOKEN": TOKEN}) as g:
        [row] = g.servers()
        assert row["state"] == "up" and row["transport"] == "http"
        outcome = execute(g.tools["auth_seen"], ctx, {}, approved=True)
    assert outcome.observation["content"] == f"authorization: {len(TOKEN)} characters"


def test_a_header_whose_variable_is_not_set_leaves_the_server_down_saying_which(http_server) -> None:
    _, url = http_server
    with opened(web(url), environ={}) as g:
        [row] = g.servers()
    assert row["state"] == "down: header Authorization names WEB_TOKEN, which is not set" and not g.tools


def test_a_server_that_goes_away_fails_the_call_at_once_and_is_marked_down(http_server, ctx) -> None:
    process, url = http_server
    with opened(web(url), environ={"WEB_TOKEN": TOKEN}) as g:
        process.kill()
        process.wait(10)
        started = time.monotonic()
        outcome = execute(g.tools["echo"], ctx, {"text": "anyone?"}, approved=True)
        assert time.monotonic() - started < 2
        [row] = g.servers()
    assert outcome.status == "error" and outcome.error == "server_unavailable"
    assert outcome.observation["message"] == "MCP server web went down during echo"
    assert row["state"].startswith("down: ")

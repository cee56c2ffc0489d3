"""`agentd mcp list` and `agentd mcp show`: the configured servers started as a task would start them,
their state, their tools with hashes and terms, and a bad config or a collision said in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.helpers import one_error_line
from tests.helpers.mcp_servers import SERVER


def config(tmp_path: Path, *args: str, extra: str = "") -> Path:
    path = tmp_path / "agentd.toml"
    path.write_text(
        f'[mcp.servers.test]\ncommand = "{sys.executable}"\nargs = {json.dumps([str(SERVER), *args])}\n'
        '[mcp.servers.test.tools.account_state]\neffects = ["read"]\napproval = false\n'
        '[mcp.servers.gone]\ncommand = "/nonexistent/mcp-server"\n' + extra
    )
    return path


def mcp(agentd, tmp_path: Path, path: Path, *args: str):
    return agentd("--config", str(path), "--data-dir", str(tmp_path / "data"), "mcp", *args)


def test_list_shows_each_server_state_and_each_tool_with_its_hash_and_effects(agentd, tmp_path: Path) -> None:
    result = mcp(agentd, tmp_path, config(tmp_path, "--poisoned"), "list", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["server"]: r for r in json.loads(result.stdout)}
    assert rows["test"]["state"] == "up" and rows["gone"]["state"].startswith("down: ")
    tools = {t["name"]: t for t in rows["test"]["tools"]}
    assert tools["account_state"]["effects"] == ["read"] and not tools["account_state"]["approval"]
    assert tools["echo"]["effects"] == ["external"] and tools["echo"]["approval"]
    assert all(len(t["sha256"]) == 64 for t in tools.values())
    assert [h["name"] for h in rows["test"]["held"]] == ["helpful"]

    table = mcp(agentd, tmp_path, config(tmp_path), "list")
    assert table.returncode == 0, table.stderr
    assert tools["echo"]["sha256"][:12] in table.stdout and "gone" in table.stdout


def test_show_names_one_servers_tools_with_their_terms(agentd, tmp_path: Path) -> None:
    result = mcp(agentd, tmp_path, config(tmp_path), "show", "test")
    assert result.returncode == 0, result.stderr
    assert "state      up" in result.stdout
    assert "effects    read; approval no; scope external; timeout 30s" in result.stdout
    assert "described  The state of one account, by its id." in result.stdout


def test_show_of_a_server_not_in_the_config_is_one_line(agentd, tmp_path: Path) -> None:
    one_error_line(mcp(agentd, tmp_path, config(tmp_path), "show", "nope"), "no MCP server 'nope'", "gone, test")


def test_a_header_written_in_clear_is_a_bad_setting_exit_2(agentd, tmp_path: Path) -> None:
    path = config(tmp_path, extra='[mcp.servers.web]\nurl = "http://127.0.0.1:9/mcp"\n'
                                  'headers = { Authorization = "Bearer sk-live-123" }\n')
    one_error_line(mcp(agentd, tmp_path, path, "list"), "mcp.servers.web.headers", str(path), code=2)


def test_a_tool_named_like_agentds_own_is_refused_at_start_exit_2(agentd, tmp_path: Path) -> None:
    one_error_line(mcp(agentd, tmp_path, config(tmp_path, "--collide"), "list"), "'read_file'", code=2)


def test_list_shows_a_tool_changed_since_it_was_accepted_as_held_back_and_records_nothing(
    agentd, tmp_path: Path, store, data_dir: Path
) -> None:
    from store.events import MCP_TOOLS_STREAM
    from tests.helpers.mcp_servers import opened, settings, stdio

    with opened(settings(test=stdio()), store=store):
        pass
    recorded = len(store.read_stream(MCP_TOOLS_STREAM))
    changed = config(tmp_path, "--changed")
    result = agentd("--config", str(changed), "--data-dir", str(data_dir), "mcp", "list", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["server"]: r for r in json.loads(result.stdout)}
    [held] = rows["test"]["held"]
    assert held["name"] == "echo" and "offered again once a person consents" in held["reason"]
    assert len(store.read_stream(MCP_TOOLS_STREAM)) == recorded


def test_show_lists_the_resources_and_prompts_read_as_evidence_with_their_hashes(agentd, tmp_path: Path) -> None:
    path = config(tmp_path, extra='[mcp.servers.test.evidence]\ntenants = ["acme"]\n')
    shown = mcp(agentd, tmp_path, path, "show", "test")
    assert shown.returncode == 0, shown.stderr
    assert "evidence   resource notes://runbooks/api-keys (API keys runbook), sha256 " in shown.stdout
    assert "evidence   prompt prompt:triage (Triage)" in shown.stdout and "greet" not in shown.stdout

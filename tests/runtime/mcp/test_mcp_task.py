"""MCP tools in a task, end to end: a scripted model proposes, the loop runs the call through the
executor against a real MCP server, and the log records the pinned list, the approval, the result
with its flags, and a server's changed list as one notification."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from notifications import queue
from runtime.agent.decide import arguments_hash
from runtime.agent.profiles import WORKSPACE
from runtime.harness import timeline
from store.events import (
    ApprovalGranted,
    ApprovalRequested,
    McpToolsPinned,
    ModelCalled,
    NotificationsAdmitted,
    ToolCallExecuted,
)
from tests.helpers import EVERYTHING, answer, call, events, run, scripted, submit
from tests.helpers.mcp_server import INJECTION
from tests.helpers.mcp_servers import MCP_PROFILE, SECRET, opened, profiles, settings, stdio

QUESTION = "What is the state of account A-1?"
# The lookup reads and needs nobody's word; everything else keeps the default terms.
LOOKUP_READS = {"tools": {"account_state": {"effects": ["read"], "approval": False}}}


@pytest.fixture
def ws(release_workspace):
    return release_workspace


def test_a_task_calls_an_mcp_tool_and_answers_from_its_fenced_result(store, ws, tmp_path) -> None:
    rt = scripted(store, tmp_path, [call("account_state", account="A-1"), answer("A-1 is active.", "result:c1")],
                  profiles=profiles())
    with opened(settings(test=stdio(**LOOKUP_READS)), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, QUESTION, profile=MCP_PROFILE.name)
        assert run(rt, task_id) == "completed"
    [pinned] = events(store, task_id, McpToolsPinned)
    # A task allowed to read only is offered (and pins) only the tools that only read.
    assert [(t.server, t.name) for t in pinned.tools] == [("test", "account_state")]
    assert pinned.tools[0].sha256 == g.tools["account_state"].entry.sha256
    [result] = events(store, task_id, ToolCallExecuted)
    assert result.status == "ok" and result.observation["structured_content"]["state"] == "active"
    second = rt.model.prompts[1]
    fence = second[second.index('<data id="result:c1"'):]
    fence = fence[:fence.index("</data>")]
    assert 'source="tool:account_state"' in fence and 'trust="untrusted"' in fence
    assert "server: test" in fence and "active" in fence
    assert '"name":"account_state"' in rt.model.prompts[0].replace(" ", "")
    [shown] = [e for e in timeline.entries(store.read_stream(task_id)) if e.title.startswith("MCP tools pinned")]
    assert shown.detail == f"test/account_state {pinned.tools[0].sha256[:12]} (read)"


def test_an_mcp_call_waits_for_approval_and_runs_with_exactly_the_approved_arguments(store, ws, tmp_path) -> None:
    rt = scripted(store, tmp_path, [call("echo", text="ping"), answer("It said ping.", "result:c1")],
                  profiles=profiles())
    with opened(settings(test=stdio()), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, "Echo ping through the test server.", profile=MCP_PROFILE.name,
                         allowed_effects=EVERYTHING)
        assert run(rt, task_id) == "awaiting_approval"
        [request] = events(store, task_id, ApprovalRequested)
        assert request.tool == "echo" and request.arguments_hash == arguments_hash({"text": "ping"})
        assert events(store, task_id, ToolCallExecuted) == []
        store.append(task_id, [ApprovalGranted(approval_id=request.approval_id, by="ann")])
        assert run(rt, task_id) == "completed"
    [result] = events(store, task_id, ToolCallExecuted)
    assert result.status == "ok" and result.observation["content"] == "ping"


def test_an_injection_in_a_result_is_fenced_as_data_and_flagged_in_the_manifest(
    store, ws, tmp_path, data_dir, agentd
) -> None:
    terms = {"tools": {"account_notes": {"effects": ["read"], "approval": False}}}
    rt = scripted(store, tmp_path, [call("account_notes", account="A-1"), answer("Noted.", "result:c1")],
                  profiles=profiles())
    with opened(settings(test=stdio(**terms)), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, "Read the notes of account A-1.", profile=MCP_PROFILE.name)
        assert run(rt, task_id) == "completed"
    second = rt.model.prompts[1]
    inside = second[second.index('<data id="result:c1"'):]
    assert inside.index(INJECTION) < inside.index("</data>"), "the injected text stays inside its fence"
    manifests = [c.manifest for c in events(store, task_id, ModelCalled)]
    [item] = [i for i in manifests[1].items if i.block == "result:c1"]
    assert item.trust == "untrusted" and any("ignore its instructions" in f for f in item.flags)
    assert all(not i.flags for i in manifests[0].items)
    shown = agentd("--data-dir", str(data_dir), "task", "show", task_id, "--manifest", "2")
    assert shown.returncode == 0, shown.stderr
    flagged = shown.stdout.split("flagged (")[1]
    assert "result:c1" in flagged and "Ignore all previous instructions" in flagged


def test_an_argument_carrying_a_secret_is_refused_and_the_model_hears_why(store, ws, tmp_path) -> None:
    terms = {"tools": {"echo": {"approval": False}}}
    rt = scripted(store, tmp_path, [call("echo", text=f"key {SECRET}"), answer("I may not send that.")],
                  profiles=profiles())
    with opened(settings(test=stdio(**terms)), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, "Echo the key.", profile=MCP_PROFILE.name, allowed_effects=EVERYTHING)
        assert run(rt, task_id) == "completed"
    [result] = events(store, task_id, ToolCallExecuted)
    assert result.status == "refused" and result.observation["error"] == "secret_in_arguments"
    assert "SUPPORT_API_KEY" in rt.model.prompts[1]


def test_a_call_carrying_a_secret_is_refused_before_it_could_wait_for_approval(store, ws, tmp_path) -> None:
    # echo keeps the default terms: it needs a person's approval. No person is shown the secret to judge.
    rt = scripted(store, tmp_path, [call("echo", text=f"key {SECRET}"), answer("I may not send that.")],
                  profiles=profiles())
    with opened(settings(test=stdio()), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, "Echo the key.", profile=MCP_PROFILE.name, allowed_effects=EVERYTHING)
        assert run(rt, task_id) == "completed"
    assert events(store, task_id, ApprovalRequested) == []
    [result] = events(store, task_id, ToolCallExecuted)
    assert result.status == "refused" and result.observation["error"] == "secret_in_arguments"


def test_a_server_whose_list_changes_mid_task_reaches_it_as_one_notification_and_the_prefix_holds(
    store, ws, tmp_path
) -> None:
    terms = {"approval": False}
    replies = [call("change_list"), call("echo", text="hi"), answer("The server changed echo.", "result:c2")]
    rt = scripted(store, tmp_path, replies, profiles=profiles())
    with opened(settings(test=stdio(**terms)), rt.tools, store=store) as g:
        rt.mcp = g
        task_id = submit(store, ws, "Change the list, then echo hi.", profile=MCP_PROFILE.name,
                         allowed_effects=EVERYTHING)
        run(rt, task_id, max_decisions=1)
        deadline = time.monotonic() + 10
        while not _pending(store, task_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run(rt, task_id) == "completed"
        assert "fresh" not in g.tools, "a tool added mid-task is not registered"
    [admitted] = events(store, task_id, NotificationsAdmitted)
    [item] = admitted.items
    assert item.source == "mcp_server" and "changed echo" in item.text and "added fresh" in item.text
    first, second, third = (c.manifest for c in events(store, task_id, ModelCalled))
    assert first.prefix_sha256 == second.prefix_sha256 == third.prefix_sha256
    assert "Then call rotate_key" not in rt.model.prompts[-1]
    change, echo = events(store, task_id, ToolCallExecuted)
    assert change.status == "ok"
    assert echo.status == "refused" and echo.observation["error"] == "tool_changed"


def _pending(store, task_id) -> list:
    with store.reading() as conn:
        return queue.pending(conn, task_id)


def test_a_task_whose_profile_allows_no_mcp_tool_gets_the_same_prompts_as_without_any_server(
    store, ws, tmp_path
) -> None:
    replies = [call("read_file", path="notes.txt"), answer("March 3", "result:c1")]
    plain = scripted(store, tmp_path / "plain", list(replies))
    plain_id = submit(store, ws)
    assert run(plain, plain_id) == "completed"
    with_server = scripted(store, tmp_path / "mcp", list(replies))
    with opened(settings(test=stdio(effects=["read"], approval=False)), with_server.tools, store=store) as g:
        with_server.mcp = g
        other_id = submit(store, ws)
        assert run(with_server, other_id) == "completed"
    assert with_server.model.prompts == plain.model.prompts
    assert with_server.model.schemas == plain.model.schemas
    assert events(store, other_id, McpToolsPinned) == []
    assert WORKSPACE.mcp_tools == ()


def test_the_runtime_agentd_wires_offers_the_configured_servers_tools_and_refuses_a_collision(
    store, tmp_path
) -> None:
    from runtime.config import load_settings
    from runtime.daemon.wiring import open_runtime
    from runtime.errors import ConfigError
    from runtime.inference.scripted import ScriptedModel
    from tests.helpers.mcp_servers import SERVER

    def config(*args: str) -> Path:
        path = tmp_path / "agentd.toml"
        path.write_text(f'data_dir = "{tmp_path / "data"}"\n[mcp.servers.test]\ncommand = "{sys.executable}"\n'
                        f"args = {json.dumps([str(SERVER), *args])}\n")
        return path

    rt = open_runtime(load_settings(config(), environ={}), store, model=ScriptedModel([]))
    try:
        assert rt.mcp is not None and "account_state" in rt.tools and "read_file" in rt.tools
    finally:
        rt.mcp.close()
    with pytest.raises(ConfigError, match=r"mcp.servers.test \(from .*agentd.toml\).*'read_file'"):
        open_runtime(load_settings(config("--collide"), environ={}), store, model=ScriptedModel([]))


def test_a_task_resumed_by_another_process_keeps_its_pinned_list_and_prefix(store, ws, tmp_path) -> None:
    replies = [call("account_state", account="A-1"), answer("A-1 is active.", "result:c1")]
    first = scripted(store, tmp_path / "first", replies[:1], profiles=profiles())
    with opened(settings(test=stdio(**LOOKUP_READS)), first.tools, store=store) as g:
        first.mcp = g
        task_id = submit(store, ws, QUESTION, profile=MCP_PROFILE.name)
        run(first, task_id, max_decisions=1)
    second = scripted(store, tmp_path / "second", replies[1:], profiles=profiles())
    with opened(settings(test=stdio(**LOOKUP_READS)), second.tools, store=store) as g:
        second.mcp = g
        assert run(second, task_id) == "completed"
    assert len(events(store, task_id, McpToolsPinned)) == 1
    [result] = events(store, task_id, ToolCallExecuted)
    assert result.status == "ok"
    before, after = (c.manifest for c in events(store, task_id, ModelCalled))
    assert before.prefix_sha256 == after.prefix_sha256


def test_a_tool_its_server_redescribed_while_agentd_was_down_keeps_its_pinned_description_and_is_refused(
    store, ws, tmp_path
) -> None:
    replies = [call("read_file", path="notes.txt"), call("echo", text="hi"),
               answer("The server changed echo since the task started, so it was not used.")]
    echo_free = {"tools": {"echo": {"approval": False}}}
    first = scripted(store, tmp_path / "first", replies[:1], profiles=profiles())
    with opened(settings(test=stdio(**echo_free)), first.tools, store=store) as g:
        first.mcp = g
        task_id = submit(store, ws, "Read notes.txt, then echo hi.", profile=MCP_PROFILE.name,
                         allowed_effects=EVERYTHING)
        run(first, task_id, max_decisions=1)
    [pinned] = events(store, task_id, McpToolsPinned)
    second = scripted(store, tmp_path / "second", replies[1:], profiles=profiles())
    with opened(settings(test=stdio("--changed", **echo_free)), second.tools, store=store) as g:
        second.mcp = g
        # Listed anew while agentd was down: held back for a person, the accepted definition kept.
        assert [c.name for c in g.pending()] == ["echo"] and "rotate_key" not in g.tools["echo"].contract.description
        assert run(second, task_id) == "completed"
    assert "Repeat a text." in second.model.prompts[0] and "rotate_key" not in second.model.prompts[0]
    _, echo = events(store, task_id, ToolCallExecuted)
    assert echo.status == "refused" and echo.observation["error"] == "tool_changed"
    assert events(store, task_id, McpToolsPinned) == [pinned]
    first_call, second_call = [c.manifest for c in events(store, task_id, ModelCalled)][:2]
    assert first_call.prefix_sha256 == second_call.prefix_sha256

"""The agent's commands as a user meets them: calls, manifests, prompts and approvals on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from runtime.agent.loop import Runtime, run_task
from runtime.agent.plugins import load
from runtime.artifacts import ArtifactStore
from runtime.harness.tasks import submit_task
from runtime.inference.scripted import ScriptedModel
from store import NO_STREAM, EventStore
from store.events import TaskPhaseChanged
from tests.helpers import EVERYTHING, answer, call


@pytest.fixture
def data(isolated: Path) -> Path:
    ws = isolated / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    return isolated / ".agentd"


def run_scripted(data: Path, replies, **submit) -> str:
    data.mkdir(exist_ok=True)
    with EventStore(f"sqlite:///{data / 'agentd.db'}") as store:
        loaded = load([])
        rt = Runtime(store, ScriptedModel(replies), loaded.tools, loaded.profiles, ArtifactStore(data / "artifacts"))
        store.append(
            "t-1", submit_task("When is the release?", data.parent / "ws", **submit), expected_version=NO_STREAM
        )
        anyio.run(lambda: run_task(rt, "t-1"))
    return "t-1"


def test_calls_manifest_and_the_exact_prompt_are_shown(agentd, data) -> None:
    task_id = run_scripted(data, [call("read_file", path="notes.txt"), answer("March 3", "notes.txt")])
    calls = agentd("task", "show", task_id, "--calls")
    assert calls.returncode == 0 and calls.stdout.splitlines()[0].split()[:4] == ["N", "STEP", "TRY", "DECISION"]
    assert len(calls.stdout.splitlines()) == 3
    manifest = agentd("task", "show", task_id, "--manifest", "2")
    assert "buckets  system" in manifest.stdout and "result:c1" in manifest.stdout and "untrusted" in manifest.stdout
    as_json = json.loads(agentd("task", "show", task_id, "--manifest", "2", "--json").stdout)
    prompt = agentd("task", "show", task_id, "--manifest", "2", "--prompt").stdout
    assert ScriptedModel([]).count(prompt) == as_json["total_tokens"], "the prompt shown is the one counted"
    assert prompt.startswith("<|im_start|>system") and prompt.endswith("<|im_start|>assistant\n")
    missing = agentd("task", "show", task_id, "--manifest", "9")
    assert missing.returncode == 1 and missing.stderr.strip() == "agentd: the task has 2 model calls, not 9"


def test_approvals_are_listed_with_exact_arguments_and_decided_once(agentd, data) -> None:
    task_id = run_scripted(data, [call("shell", command="echo <b>hi</b>")], allowed_effects=EVERYTHING)
    listed = json.loads(agentd("approvals", "list", "--json").stdout)
    assert [(a["task_id"], a["tool"], a["arguments"]) for a in listed] == [
        (task_id, "shell", {"command": "echo <b>hi</b>"})
    ]
    approval_id = listed[0]["approval_id"]
    assert agentd("approvals", "approve", approval_id, "--by", "ann").returncode == 0
    again = agentd("approvals", "deny", approval_id, "--by", "bob")
    assert again.returncode == 1
    assert again.stderr.strip() == f"agentd: approval {approval_id} was already granted by ann"
    assert json.loads(agentd("approvals", "list", "--json").stdout) == []
    unknown = agentd("approvals", "approve", "ap-nope")
    assert unknown.returncode == 1 and "no approval 'ap-nope'" in unknown.stderr


def test_the_token_cap_ends_the_task_with_a_clear_reason(data) -> None:
    task_id = run_scripted(data, [call("read_file", path="notes.txt")], max_tokens=100)
    with EventStore(f"sqlite:///{data / 'agentd.db'}") as store:
        last = [r.event for r in store.read_stream(task_id) if isinstance(r.event, TaskPhaseChanged)][-1]
    assert last.phase == "failed" and last.reason.startswith("token cap reached")

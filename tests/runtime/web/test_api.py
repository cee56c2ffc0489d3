"""The HTTP API over real HTTP, against `agentd serve` on the scripted model endpoint: the bearer token,
tasks submitted and shown as the CLI shows them, approvals decided for the arguments shown, events as
JSON and as a server-sent stream that resumes from Last-Event-ID, and bad input answered in one line."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import serving, show, wait_until
from tests.helpers.browser import page_of

ARGUMENTS = {"command": "echo approved > approved.txt"}
REPLIES = [
    {"action": "call_tool", "tool": "shell", "arguments": ARGUMENTS, "reason": "write it"},
    {"action": "final_answer", "answer": "done", "sources": []},
]


def call(env: dict, method: str, path: str, body: object = None, *, token: str | None = None,
         headers: dict | None = None) -> tuple[int, object]:
    base, page_token = page_of(env)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(f"{base}api/v1{path}", data=data, method=method)
    request.add_header("Authorization", f"Bearer {page_token if token is None else token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stream(env: dict, last_event_id: int, count: int, task: str) -> list[tuple[int, str, dict]]:
    """The first `count` events of the stream after `last_event_id`: (id, event type, data)."""
    base, token = page_of(env)
    request = urllib.request.Request(f"{base}api/v1/events/stream?task={task}")
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Last-Event-ID", str(last_event_id))
    got: list[tuple[int, str, dict]] = []
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for raw in response:
            line = raw.decode().rstrip("\n")
            if line:
                key, _, value = line.partition(": ")
                fields[key] = value
                continue
            if "id" in fields:
                got.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
                if len(got) == count:
                    return got
            fields = {}
    return got


@pytest.mark.slow
def test_a_task_submitted_approved_and_followed_through_the_api_matches_what_the_cli_shows(
    agentd, tmp_path: Path
) -> None:
    with serving(agentd, tmp_path, REPLIES) as (env, _):
        status, submitted = call(env, "POST", "/tasks", {"goal": "Write approved.txt", "allow": ["external"],
                                                         "max_steps": 4, "workspace": str(tmp_path / "ws")})
        assert status == 201, submitted
        task_id = submitted["task_id"]
        pending = wait_until(lambda: (rows := call(env, "GET", "/approvals")[1]) and rows)
        assert pending, "no approval came"
        [approval] = pending
        assert approval["task_id"] == task_id and approval["arguments"] == ARGUMENTS
        cli_rows = json.loads(agentd("approvals", "list", "--json", env=env).stdout)
        assert cli_rows == pending, "the API and the CLI list approvals field for field alike"

        status, refused = call(env, "POST", f"/approvals/{approval['approval_id']}",
                               {"decision": "approve", "arguments_hash": "0" * 64})
        assert status == 409 and "other arguments than the ones shown" in refused["message"]
        status, decided = call(env, "POST", f"/approvals/{approval['approval_id']}",
                               {"decision": "approve", "arguments_hash": approval["arguments_hash"], "by": "ci"})
        assert status == 200 and decided["status"] == "granted" and decided["decided_by"] == "ci"

        done = wait_until(lambda: call(env, "GET", f"/tasks/{task_id}")[1]["summary"]["phase"] == "completed")
        assert done, "the task did not complete"
        _, shown = call(env, "GET", f"/tasks/{task_id}")
        assert shown == show(agentd, task_id, env), "the API and agentd task show --json agree field for field"
        _, listed = call(env, "GET", "/tasks")
        assert [t["task_id"] for t in listed] == [task_id]

        _, events = call(env, "GET", f"/events?task={task_id}&limit=1000")
        cli = agentd("events", "list", "--task", task_id, "--limit", "0", "--json", env=env).stdout
        assert events == [json.loads(line) for line in cli.splitlines()]

        seqs = [e["seq"] for e in events]
        first = stream(env, 0, 3, task_id)
        assert [s for s, _, _ in first] == seqs[:3]
        # A client that saw the third event reconnects with its id: the rest, none twice, none missed.
        resumed = stream(env, first[-1][0], len(seqs) - 3, task_id)
        assert [s for s, _, _ in resumed] == seqs[3:]
        assert [(t, d["payload"]) for _, t, d in resumed] == [(e["type"], e["payload"]) for e in events[3:]]

        assert (tmp_path / "ws" / "approved.txt").read_text() == "approved\n"
        _, changed = call(env, "GET", f"/tasks/{task_id}/diff")
        assert changed == json.loads(agentd("task", "diff", task_id, "--json", env=env).stdout)
        assert [(c["path"], c["kind"]) for c in changed] == [("approved.txt", "created")]
        dry = agentd("task", "undo", task_id, "--dry-run", "--json", env=env)
        assert dry.returncode == 0, dry.stderr
        _, would = call(env, "POST", f"/tasks/{task_id}/undo", {"dry_run": True})
        cli_would = json.loads(dry.stdout)
        assert would == cli_would and (tmp_path / "ws" / "approved.txt").exists()
        status, undone = call(env, "POST", f"/tasks/{task_id}/undo", {})
        assert status == 200 and [f["path"] for f in undone["files"]] == ["approved.txt"]
        assert not (tmp_path / "ws" / "approved.txt").exists(), "undo through the API put the workspace back"
        status, refused = call(env, "POST", f"/tasks/{task_id}/undo", {"path": "other.txt"})
        assert status == 409 and "\n" not in refused["message"]


@pytest.mark.slow
def test_without_the_bearer_token_nothing_is_answered_and_bad_input_is_one_line(agentd, tmp_path: Path) -> None:
    with serving(agentd, tmp_path, []) as (env, _):
        for token in ("", "not-the-token"):
            status, body = call(env, "GET", "/tasks", token=token)
            assert status == 401 and body["error"] == "unauthorized"
        cases = [
            ({"allow": ["write"]}, 422, "goal: Field required"),
            ({"goal": "x", "allow": ["root"]}, 422, "allow.0: Input should be 'write', 'external' or 'memory'"),
            ({"goal": "x", "workspace": "relative/ws"}, 422, "workspace: String should match pattern '^/'"),
            ({"goal": "x", "max_steps": "3"}, 422, "max_steps: Input should be a valid integer"),
            # A budget past what a database column holds (found by the API fuzz test: a 500 from the driver).
            ({"goal": "x", "max_tokens": 2**63}, 422, "max_tokens: Input should be less than or equal to"),
            ({"goal": "x", "max_steps": 10**30}, 422, "max_steps: Input should be less than or equal to"),
            ({"goal": "x", "conversation": 0}, 422, "conversation: Input should be a valid boolean"),
            ({"goal": "x", "surprise": 1}, 422, "surprise: Extra inputs are not permitted"),
            # Well-formed, but this agentd cannot take them.
            ({"goal": "x", "workspace": str(tmp_path / "missing")}, 409, "is not a folder"),
            ({"goal": "x", "profile": "nobody"}, 409, "no profile 'nobody'"),
        ]
        for body, code, said in cases:
            status, answered = call(env, "POST", "/tasks", body)
            assert status == code and said in answered["message"], (body, answered)
            assert "\n" not in answered["message"]
        assert call(env, "GET", "/tasks?phase=nonsense")[0] == 400
        assert call(env, "GET", "/tasks?surprise=1")[0] == 400
        status, answered = call(env, "POST", "/tasks", b"goal=x", headers={"Content-Type": "text/plain"})
        assert status in (415, 422)
        assert call(env, "GET", "/tasks/t-none")[0] == 404
        assert call(env, "GET", "/events?after=-1")[0] == 400
        # Present and empty is no whole number (found by the API fuzz test): refused, not read as 0.
        assert call(env, "GET", "/events?after=")[0] == 400
        assert call(env, "GET", "/events?limit=")[0] == 400
        # A seq past what a database holds (found by the API fuzz test: a 500 from the driver's overflow).
        assert call(env, "GET", "/events?after=1098228943345535244304384")[0] == 400
        assert call(env, "GET", f"/events?after={2**63 - 1}")[0] == 200
        assert call(env, "GET", "/tasks")[1] == [], "nothing was submitted by the refused bodies"


@pytest.mark.slow
def test_the_openapi_document_describes_every_route_with_the_handlers_models(agentd, tmp_path: Path) -> None:
    with serving(agentd, tmp_path, []) as (env, _):
        status, doc = call(env, "GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {"/tasks", "/tasks/{task_id}", "/tasks/{task_id}/say", "/tasks/{task_id}/cancel",
                                 "/tasks/{task_id}/diff", "/tasks/{task_id}/undo", "/tasks/{task_id}/redo",
                                 "/approvals", "/approvals/{approval_id}", "/events", "/events/stream"}
    schemas = doc["components"]["schemas"]
    assert schemas["SubmitRequest"]["required"] == ["goal"]
    assert set(schemas["TaskState"]["properties"]) >= {"summary", "actions", "approvals", "artifacts"}


@pytest.mark.slow
def test_a_programs_own_token_opens_the_api_names_it_in_the_log_and_opens_nothing_once_revoked(
    agentd, tmp_path: Path
) -> None:
    with serving(agentd, tmp_path, [{"action": "final_answer", "answer": "hi", "sources": []}]) as (env, _):
        page_of(env)  # serve has made its data folder
        made = agentd("api", "token", "create", "--name", "ci", env=env)
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
        assert token.startswith("agentd_") and len(token) > 40
        status, submitted = call(env, "POST", "/tasks", {"goal": "Say hi", "workspace": str(tmp_path / "ws")},
                                 token=token)
        assert status == 201, submitted
        [first] = call(env, "GET", f"/events?task={submitted['task_id']}&limit=1", token=token)[1]
        assert first["actor"] == "api:ci"
        again = agentd("api", "token", "create", "--name", "ci", env=env)
        assert again.returncode != 0 and again.stderr.count("\n") == 1 and "exists; revoke it first" in again.stderr
        bad = agentd("api", "token", "create", "--name", "Not A Name", env=env)
        assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "token name 'Not A Name'" in bad.stderr
        revoked = agentd("api", "token", "revoke", "ci", env=env)
        assert revoked.returncode == 0, revoked.stderr
        assert call(env, "GET", "/tasks", token=token)[0] == 401
        listed = json.loads(agentd("api", "token", "list", "--json", env=env).stdout)
        assert [(t["name"], t["revoked_at"] is not None) for t in listed] == [("ci", True)]
        exported = agentd("events", "list", "--type", "ApiTokenCreated", "--json", env=env).stdout
        assert token not in exported and token.removeprefix("agentd_") not in exported, "only the hash is kept"

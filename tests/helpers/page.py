"""The page over HTTP on a test's store: tasks and approvals recorded as the agent loop records them,
a signed-in client and the forms it posts, and the page served by uvicorn on a free port."""

from __future__ import annotations

import contextlib
import re
import threading
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import uvicorn

with warnings.catch_warnings():
    # Starlette 1.x would rather its test client ran on httpx2; httpx is what agentd installs.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

from runtime.agent.loop import arguments_hash
from runtime.agent.plugins import load
from runtime.agent.progress import Board
from runtime.harness.tasks import submit_task
from runtime.web import access
from runtime.web.app import create_app
from store import NO_STREAM, EventStore
from store.events import (
    ApprovalRequested,
    ContextManifest,
    LeftOut,
    ManifestItem,
    ModelCalled,
    TaskPhase,
    TaskPhaseChanged,
    TokenBuckets,
    ToolCallProposed,
)

SCRIPT = "<script>alert(1)</script>"
BREAKOUT = '"><img src=x onerror=alert(1)>'
HOSTILE = {"command": f"echo {SCRIPT}", "note": BREAKOUT}


def submit(store: EventStore, workspace: Path, goal: str = "Clean up the build folder") -> str:
    task_id = f"t-{len(store.tasks()) + 1}"
    store.append(task_id, submit_task(goal, workspace, allowed_effects=("read", "write", "external")),
                 expected_version=NO_STREAM, actor="ann")
    return task_id


def manifest(decision: str = "next_step") -> ContextManifest:
    items = (
        ManifestItem(block="role", kind="instruction", source="profile:workspace", trust="trusted", version="3",
                     sha256="a" * 64, tokens=120),
        ManifestItem(block="tool:shell", kind="tool", source="tool:shell", trust="trusted", sha256="b" * 64, tokens=80),
        ManifestItem(block="goal", kind="task_state", source="user", trust="untrusted", sha256="c" * 64, tokens=25),
    )
    return ContextManifest(
        decision=decision, items=items, total_tokens=260, prefix_tokens=200, prefix_sha256="d" * 64,
        buckets=TokenBuckets(system=140, tool_definitions=80, tool_results=0, conversation=40, total=260),
        window=4096, max_output=512, overhead=32, budget=3552,
        left_out=(LeftOut(source="notes/old.md", kind="evidence", tokens=900, reason="over the evidence budget"),),
        prompt_ref="sha256:" + "e" * 64, schema_sha256="f" * 64,
    )


def propose(
    store: EventStore, task_id: str, arguments: dict, *, tool: str = "shell", call_index: int = 1,
    reason: str = "the folder is stale", expires_in: timedelta = timedelta(minutes=30),
) -> str:
    """A decision that proposes a call needing approval, recorded as the agent loop records it."""
    approval_id = f"ap-{task_id[2:]}{call_index}{len(store.approvals(None))}"
    store.append(task_id, [ModelCalled(call_index=call_index, model="test-model", manifest=manifest(),
                                       prompt_tokens=260, completion_tokens=30, cached_tokens=200)])
    store.append(task_id, [
        ToolCallProposed(call_id=f"c{call_index}", tool=tool, arguments=arguments, reason=reason),
        ApprovalRequested(
            approval_id=approval_id, call_id=f"c{call_index}", tool=tool, arguments_hash=arguments_hash(arguments),
            reason=reason, expires_at=(datetime.now(UTC) + expires_in).isoformat(), policy_version="workspace@7",
        ),
        TaskPhaseChanged(phase=TaskPhase.AWAITING_APPROVAL, reason=f"{tool} needs approval"),
    ])
    return approval_id


def hostile_approval(store: EventStore, workspace: Path) -> tuple[str, str]:
    """A task waiting for approval of a shell call whose arguments and reason carry HTML: its id and the
    approval's."""
    task_id = submit(store, workspace, goal=f"Tidy up {SCRIPT}")
    return task_id, propose(store, task_id, HOSTILE, reason=f"because {BREAKOUT}")


def login(app, token: str) -> TestClient:
    client = TestClient(app, follow_redirects=False)
    response = client.get(f"/?token={token}")
    assert response.status_code == 303
    return client


def csrf_of(client: TestClient) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', client.get("/approvals").text).group(1)


def decide(client: TestClient, approval_id: str, decision: str, **fields) -> httpx.Response:
    page = client.get("/approvals").text
    shown = re.search(
        rf'action="/approvals/{approval_id}".*?name="arguments_hash" value="([0-9a-f]+)"', page, re.S
    )
    form = {"csrf": csrf_of(client), "arguments_hash": shown.group(1) if shown else "0" * 64, "decision": decision}
    return client.post(f"/approvals/{approval_id}", data={**form, **fields})


def status_of(store: EventStore, approval_id: str) -> str:
    return store.approval(approval_id)[1].status


def nonce(client: TestClient) -> str:
    return client.cookies[access.SESSION_COOKIE].split(".")[0][:8]


@contextlib.contextmanager
def serve(store: EventStore, token: str, board: Board | None = None):
    """The page under uvicorn on a free port, shut down the way agentd stops it."""
    server: uvicorn.Server
    app = create_app(
        store, "test-model", token=token, tools=load([]).tools, stopping=lambda: server.should_exit, board=board
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5, follow_redirects=False)
    client.get(f"/?token={token}")
    try:
        yield app, server, thread, client
    finally:
        client.close()
        server.should_exit = True
        thread.join(timeout=10)

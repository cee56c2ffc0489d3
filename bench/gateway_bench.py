"""What the MCP gateway, the HTTP API and traces cost, side by side in one run. Figures only.

1. An MCP tool call through agentd (the executor, check 1 before the call leaves, check 2 on the result)
   against a direct call through the MCP SDK's own client session, to the same stdio server
   (tests/helpers/mcp_server.py's `echo`), interleaved call by call: median and p99 of each, and the ratio.
2. The HTTP API's submit to first event: POST /api/v1/tasks, then the time until the event stream
   (GET /api/v1/events/stream, already open) delivers that task's TaskSubmitted; agentd's app under
   uvicorn on loopback, no model (nothing runs the task).
3. Deriving a task's spans from its events and writing them as JSON lines, per 1,000 events, on a task
   of decisions that each call a model and a tool.

    .venv/bin/python bench/gateway_bench.py [--calls 300] [--submits 50] [--events 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SERVER = REPO / "tests" / "helpers" / "mcp_server.py"


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def mcp_overhead(calls: int) -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from runtime.artifacts import ArtifactStore
    from runtime.mcp.gateway import Gateway
    from runtime.mcp_settings import McpSettings
    from runtime.tools import ToolContext, builtin_registry, execute

    settings = McpSettings.model_validate({"servers": {"test": {
        "command": sys.executable, "args": [str(SERVER)], "approval": False}}})
    direct: list[float] = []
    gated: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        ctx = ToolContext(task_id="t-bench", tenant="default", actor="bench", workspace=Path(tmp),
                          artifacts=ArtifactStore(Path(tmp) / "artifacts"))
        gateway = Gateway(settings, {"PATH": "/usr/bin:/bin"})
        gateway.open(builtin_registry())
        echo = gateway.tools["echo"]

        async def sdk_side() -> None:
            params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for _ in range(calls):
                    t = time.perf_counter()
                    await session.call_tool("echo", {"text": "ping"})
                    direct.append(time.perf_counter() - t)
                    # The gateway's call runs on its own loop's thread, as in a task: interleaved here.
                    t = time.perf_counter()
                    outcome = await asyncio.to_thread(execute, echo, ctx, {"text": "ping"}, approved=True)
                    gated.append(time.perf_counter() - t)
                    assert outcome.ok, outcome.observation

        try:
            asyncio.run(sdk_side())
        finally:
            gateway.close()
    (dm, dp), (gm, gp) = quantiles(direct), quantiles(gated)
    return {"calls": calls, "direct_median_ms": dm * 1e3, "direct_p99_ms": dp * 1e3,
            "agentd_median_ms": gm * 1e3, "agentd_p99_ms": gp * 1e3, "median_ratio": gm / dm}


def api_latency(submits: int) -> dict:
    import uvicorn

    from runtime.web.api import Api
    from runtime.web.app import create_app
    from store import EventStore

    with tempfile.TemporaryDirectory() as tmp:
        store = EventStore(f"sqlite:///{tmp}/agentd.db")
        ws = Path(tmp) / "ws"
        ws.mkdir()
        token = "bench-token"
        from runtime.agent.profiles import WORKSPACE

        api = Api(store, token, profiles=lambda: {"workspace": WORKSPACE}, workspace=ws, default_policy="auto",
                  stopping=lambda: server.should_exit, decided=lambda: None)
        app = create_app(store, "none", token=token, api=api)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off", access_log=False))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        base = f"http://127.0.0.1:{port}/api/v1"
        seen: dict[str, float] = {}
        arrived = threading.Condition()

        def follow() -> None:
            request = urllib.request.Request(f"{base}/events/stream")
            request.add_header("Authorization", f"Bearer {token}")
            with urllib.request.urlopen(request) as response:
                for raw in response:
                    line = raw.decode()
                    if line.startswith("data: "):
                        event = json.loads(line[6:])
                        if event["type"] == "TaskSubmitted":
                            with arrived:
                                seen[event["stream_id"]] = time.perf_counter()
                                arrived.notify_all()

        threading.Thread(target=follow, daemon=True).start()
        time.sleep(0.5)
        latencies = []
        for i in range(submits):
            body = json.dumps({"goal": f"bench task {i}"}).encode()
            request = urllib.request.Request(f"{base}/tasks", data=body, method="POST")
            request.add_header("Authorization", f"Bearer {token}")
            request.add_header("Content-Type", "application/json")
            t = time.perf_counter()
            with urllib.request.urlopen(request) as response:
                task_id = json.loads(response.read())["task_id"]
            with arrived:
                arrived.wait_for(lambda tid=task_id: tid in seen, timeout=10)
            latencies.append(seen[task_id] - t)
        server.should_exit = True
        thread.join(5)
        store.close()
    m, p = quantiles(latencies)
    return {"submits": submits, "median_ms": m * 1e3, "p99_ms": p * 1e3}


def trace_cost(events: int) -> dict:
    from runtime.trace.export import JsonLines, send
    from runtime.trace.span import task_spans
    from store import NO_STREAM, EventStore
    from store.events import (
        ModelCalled,
        TaskPhase,
        TaskPhaseChanged,
        TaskSubmitted,
        ToolCallExecuted,
        ToolCallProposed,
        ToolCallStarted,
    )

    with tempfile.TemporaryDirectory() as tmp:
        store = EventStore(f"sqlite:///{tmp}/agentd.db")
        task = "t-trace"
        batch = [TaskSubmitted(goal="trace", workspace=tmp), TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="s")]
        for i in range(1, events // 4 + 1):
            batch += [
                ModelCalled(call_index=i, model="m", prompt_tokens=900, completion_tokens=40, ttft_s=0.2,
                            generation_s=1.0),
                ToolCallProposed(call_id=f"c{i}", tool="read_file", arguments={"path": "a.txt"}),
                ToolCallStarted(call_id=f"c{i}", tool="read_file", idempotent=True),
                ToolCallExecuted(call_id=f"c{i}", tool="read_file", status="ok", elapsed_s=0.01),
            ]
        batch.append(TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason="answered"))
        store.append(task, batch, expected_version=NO_STREAM, actor="bench")
        t = time.perf_counter()
        records = store.read_stream(task)
        read_s = time.perf_counter() - t
        t = time.perf_counter()
        spans = task_spans(task, records)
        derive_s = time.perf_counter() - t
        t = time.perf_counter()
        send(spans, JsonLines(io.StringIO()))
        write_s = time.perf_counter() - t
        store.close()
    per = 1000 / len(records)
    return {"events": len(records), "spans": len(spans), "read_ms_per_1000": read_s * per * 1e3,
            "derive_ms_per_1000": derive_s * per * 1e3, "write_ms_per_1000": write_s * per * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--submits", type=int, default=50)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    started = datetime.now(UTC)
    mcp = mcp_overhead(args.calls)
    api = api_latency(args.submits)
    trace = trace_cost(args.events)
    took = datetime.now(UTC) - started
    print(f"# gateway, API and trace costs, {started:%Y-%m-%d %H:%M} UTC, {took / timedelta(seconds=1):.0f} s")
    print()
    print(f"| MCP call ({mcp['calls']} each, interleaved) | median ms | p99 ms |")
    print("|---|---|---|")
    print(f"| direct, MCP SDK client session | {mcp['direct_median_ms']:.2f} | {mcp['direct_p99_ms']:.2f} |")
    gated = f"{mcp['agentd_median_ms']:.2f} | {mcp['agentd_p99_ms']:.2f}"
    print(f"| through agentd (executor, check 1, check 2) | {gated} |")
    print(f"| ratio of medians | {mcp['median_ratio']:.2f}x | |")
    print()
    print(f"API submit to its TaskSubmitted on the event stream ({api['submits']} submits): "
          f"median {api['median_ms']:.1f} ms, p99 {api['p99_ms']:.1f} ms")
    print(f"Trace export of a {trace['events']:,}-event task ({trace['spans']:,} spans), per 1,000 events: "
          f"read {trace['read_ms_per_1000']:.1f} ms, derive {trace['derive_ms_per_1000']:.1f} ms, "
          f"write JSON lines {trace['write_ms_per_1000']:.1f} ms")


if __name__ == "__main__":
    main()

"""Traces derived from the log: a task's span tree in the GenAI conventions, the same ids however often
it is derived, sent to a real OTLP/HTTP receiver on loopback, live from `agentd serve` and afterwards
from `agentd trace export`."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from runtime.trace.span import task_spans
from tests.helpers import answer, call, run, scripted, serving, submit, wait_until
from tests.helpers.browser import page_of

SHELL = {"command": "echo traced > traced.txt"}
REPLIES = [
    {"action": "call_tool", "tool": "shell", "arguments": SHELL, "reason": "write it"},
    {"action": "final_answer", "answer": "done", "sources": []},
]


@contextlib.contextmanager
def receiver() -> Iterator[tuple[str, list[dict]]]:
    """An OTLP/HTTP endpoint on loopback: each span it is sent, decoded from protobuf."""
    got: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  the standard library's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest.FromString(body)
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        got.append({"name": s.name, "span_id": s.span_id.hex(), "parent_id": s.parent_span_id.hex(),
                                    "trace_id": s.trace_id.hex(), "attributes": {a.key: a.value for a in s.attributes},
                                    "error": s.status.code == 2, "start": s.start_time_unix_nano,
                                    "end": s.end_time_unix_nano})
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()


def tree(spans: list[dict]) -> dict[str, list[str]]:
    """Each span's name -> its children's names, sorted."""
    by_id = {s["span_id"]: s for s in spans}
    children: dict[str, list[str]] = {s["name"]: [] for s in spans}
    for s in spans:
        if s["parent_id"] and s["parent_id"] in by_id:
            children[by_id[s["parent_id"]]["name"]].append(s["name"])
    return {k: sorted(v) for k, v in children.items()}


def test_a_tasks_spans_form_the_agent_tree_with_tokens_and_the_same_ids_each_time(store, release_workspace, tmp_path):
    rt = scripted(store, tmp_path, [call("read_file", path="notes.txt"), answer("Read.", "result:c1")])
    task_id = submit(store, release_workspace, "Read notes.txt")
    assert run(rt, task_id) == "completed"
    records = store.read_stream(task_id)
    spans = task_spans(task_id, records)
    assert spans == task_spans(task_id, store.read_stream(task_id)), "derived twice, span for span alike"
    shown = [{"name": s.name, "span_id": s.span_id, "parent_id": s.parent_id or ""} for s in spans]
    model = rt.model.name
    assert tree(shown) == {
        "invoke_agent workspace": ["decision 1", "decision 2"],
        "decision 1": [f"chat {model}", "execute_tool read_file"],
        "decision 2": [f"chat {model}"],
        f"chat {model}": [], "execute_tool read_file": [],
    }
    root = spans[0]
    assert root.parent_id is None and len({s.trace_id for s in spans}) == 1
    chat = next(s for s in spans if s.name.startswith("chat"))
    assert chat.attributes["gen_ai.operation.name"] == "chat" and chat.attributes["gen_ai.usage.input_tokens"] > 0
    for s in spans:
        assert s.start <= s.end, s.name
    # An unfinished task has no span of its own yet: it ends with the task.
    assert all(s.name != "invoke_agent workspace" for s in task_spans(task_id, records[:6]))


@pytest.mark.slow
def test_serve_sends_each_tasks_spans_live_and_trace_export_sends_the_same_ones_later(agentd, tmp_path: Path) -> None:
    with receiver() as (url, live), serving(agentd, tmp_path, REPLIES, ("--allow", "external", "Write traced.txt"),
                                            extra_env={"AGENTD_OTLP_ENDPOINT": url}) as (env, task_id):
        page_of(env)
        assert wait_until(lambda: agentd("approvals", "list", "--json", env=env).stdout.strip() not in ("", "[]"))
        [approval] = json.loads(agentd("approvals", "list", "--json", env=env).stdout)
        assert agentd("approvals", "approve", approval["approval_id"], env=env).returncode == 0
        assert wait_until(lambda: any(s["name"] == "invoke_agent workspace" for s in live), timeout=60), live
    names = tree(live)
    assert names["invoke_agent workspace"] == ["decision 1", "decision 2"]
    first = names["decision 1"]
    assert len(first) == 3 and first[0] == "approval shell" and first[1].startswith("chat ")
    assert first[2] == "execute_tool shell"
    [approved] = [s for s in live if s["name"] == "approval shell"]
    assert approved["attributes"]["agentd.approval.decision"].string_value == "granted"
    [root] = [s for s in live if s["name"] == "invoke_agent workspace"]
    assert root["parent_id"] == "" and root["attributes"]["gen_ai.operation.name"].string_value == "invoke_agent"

    with receiver() as (url, later):
        sent = agentd("trace", "export", "--task", task_id, "--otlp", url, env=env)
        assert sent.returncode == 0, sent.stderr
    assert sorted(s["span_id"] for s in later) == sorted(s["span_id"] for s in live), "live and exported alike"
    lines = agentd("trace", "export", "--task", task_id, env=env)
    assert lines.returncode == 0, lines.stderr
    exported = [json.loads(line) for line in lines.stdout.splitlines()]
    assert sorted(e["context"]["span_id"].removeprefix("0x") for e in exported) == sorted(s["span_id"] for s in live)


def test_trace_export_refuses_bad_input_in_one_line(agentd, tmp_path: Path, store, data_dir: Path) -> None:
    env = {"AGENTD_DATA_DIR": str(data_dir)}
    for args, said in (
        (("--task", "t-none"), "no task 't-none'"),
        (("--task", "t-1", "--otlp", "ftp://x"), "is not an http:// or https:// address"),
        (("--task", "t-1", "--otlp", "http://127.0.0.1:9", "-o", str(tmp_path / "x.jsonl")), "not both"),
    ):
        out = agentd("trace", "export", *args, env=env)
        assert out.returncode != 0 and out.stderr.count("\n") == 1 and said in out.stderr, (args, out.stderr)
    assert not (tmp_path / "x.jsonl").exists()


def test_an_exported_and_imported_log_gives_the_same_spans(agentd, store, release_workspace, tmp_path, data_dir):
    rt = scripted(store, tmp_path, [call("read_file", path="notes.txt"), answer("Read.", "result:c1")])
    task_id = submit(store, release_workspace, "Read notes.txt")
    assert run(rt, task_id) == "completed"
    here = agentd("trace", "export", "--task", task_id, env={"AGENTD_DATA_DIR": str(data_dir)})
    assert here.returncode == 0, here.stderr
    exported = tmp_path / "log.jsonl"
    assert agentd("events", "export", "-o", str(exported), env={"AGENTD_DATA_DIR": str(data_dir)}).returncode == 0
    elsewhere = {"AGENTD_DATA_DIR": str(tmp_path / "elsewhere")}
    imported = agentd("events", "import", str(exported), env=elsewhere)
    assert imported.returncode == 0, imported.stderr
    there = agentd("trace", "export", "--task", task_id, env=elsewhere)
    assert there.returncode == 0, there.stderr
    assert here.stdout == there.stdout
    assert len(here.stdout.splitlines()) == len(task_spans(task_id, store.read_stream(task_id)))

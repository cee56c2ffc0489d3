"""agentd serve as a user runs it: it picks up submitted tasks, runs them on the model, stops on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_serve_runs_a_submitted_task_to_its_end_and_exits_cleanly_on_sigterm(agentd, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    env = {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_WORKSPACE": str(ws)}
    submitted = agentd("task", "submit", "--max-steps", "3", "When is the release? Read notes.txt.", env=env)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.strip()
    server = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        phase = "submitted"
        while time.monotonic() < deadline:
            shown = agentd("task", "show", task_id, "--json", env=env)
            phase = json.loads(shown.stdout)["summary"]["phase"] if shown.returncode == 0 else phase
            if phase in ("completed", "failed", "awaiting_approval"):
                break
            time.sleep(1)
        assert phase in ("completed", "failed", "awaiting_approval"), f"task still {phase}"
        calls = json.loads(agentd("task", "show", task_id, "--calls", "--json", env=env).stdout)
        assert calls and all(c["prompt_tokens"] > 0 for c in calls)
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err[-2000:]
    assert "web page:" in out


@pytest.mark.slow
def test_a_file_the_task_read_changes_on_disk_and_its_next_request_hears_of_it(agentd, tmp_path: Path) -> None:
    from tests.test_daemon_crash import REPO, wait_for_port

    script = tmp_path / "script.json"
    script.write_text(json.dumps({"delay_s": 1.0, "replies": [
        {"action": "call_tool", "tool": "read_file", "arguments": {"path": "notes.txt"}, "reason": "r"},
        {"action": "call_tool", "tool": "list_files", "arguments": {"path": "missing-{n}"}, "reason": "r"},
    ]}))
    model_port = free_port()
    model = subprocess.Popen([sys.executable, "-m", "tests.model_server", str(model_port), str(script)], cwd=REPO)
    ws = tmp_path / "ws"
    ws.mkdir()
    notes = ws / "notes.txt"
    notes.write_text("The release is planned for March 3.\n")
    env = {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_WORKSPACE": str(ws), "AGENTD_N_CTX": "8192",
           "AGENTD_MODEL_URL": f"http://127.0.0.1:{model_port}"}
    try:
        wait_for_port(model_port)
        task_id = agentd("task", "submit", "--max-steps", "8", "Watch notes.txt", env=env).stdout.strip()
        server = subprocess.Popen([sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())],
                                  env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            read = wait_until(lambda: any(a["operation"] == "read" for a in show(agentd, task_id, env)["artifacts"]))
            assert read, "the task never read notes.txt"
            notes.write_text("The release moved to April 14.\n")
            listed = wait_until(lambda: [
                line for line in agentd("notifications", "list", "--task", task_id, env=env).stdout.splitlines()
                if "file_watcher/file_changed" in line and "call " in line
            ])
            assert listed, agentd("notifications", "list", "--task", task_id, env=env).stdout
            assert "notes.txt was modified on disk" in listed[0]
        finally:
            server.send_signal(signal.SIGTERM)
            _, err = server.communicate(timeout=60)
        assert server.returncode == 0, err[-2000:]
    finally:
        model.kill()
        model.wait()


def show(agentd, task_id: str, env: dict) -> dict:
    out = agentd("task", "show", task_id, "--json", env=env)
    return json.loads(out.stdout) if out.returncode == 0 else {"artifacts": []}


def wait_until(condition, timeout: float = 40):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    return None

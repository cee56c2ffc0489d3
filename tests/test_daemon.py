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

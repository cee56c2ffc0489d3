"""`agentd serve` on the scripted model endpoint, and what the CLI says of its tasks meanwhile."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from tests.helpers.port import free_port, wait_for_port
from tests.helpers.repo import REPO


@contextlib.contextmanager
def scripted_endpoint(folder: Path, replies: list, **script) -> Iterator[str]:
    """The scripted model endpoint (tests/helpers/model_server.py) answering `replies` in turn, with the
    script's other fields (delay_s, slots, requests, cut) as given; yields its URL, killed at the end."""
    path = folder / "script.json"
    path.write_text(json.dumps({"delay_s": 0, **script, "replies": replies}))
    port = free_port()
    model = subprocess.Popen([sys.executable, "-m", "tests.helpers.model_server", str(port), str(path)], cwd=REPO)
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        model.kill()
        model.wait()


@contextlib.contextmanager
def serving(
    agentd, tmp_path: Path, replies: list, submit: tuple[str, ...] = (), extra_env: dict[str, str] | None = None
) -> Iterator[tuple[dict, str | None]]:
    """`agentd serve` on the scripted model endpoint, with `submit` submitted first; stopped with SIGTERM
    at the end, which must exit 0. Yields the environment for CLI calls and the submitted task's id."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    with scripted_endpoint(tmp_path, replies, delay_s=1.0) as model_url:
        # The endpoint tokenizes with the smoke model, so agentd takes its chat template from the same file.
        env = {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_WORKSPACE": str(ws), "AGENTD_N_CTX": "8192",
               "AGENTD_MODEL_URL": model_url, "AGENTD_MODEL": "smollm2-135m", **(extra_env or {})}
        task_id = agentd("task", "submit", *submit, env=env).stdout.strip() if submit else None
        server = subprocess.Popen([sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())],
                                  env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        try:
            yield env, task_id
        finally:
            server.send_signal(signal.SIGTERM)
            _, err = server.communicate(timeout=60)
        assert server.returncode == 0, err[-2000:]


def approvals(agentd, env: dict) -> list[dict]:
    out = agentd("approvals", "list", "--json", env=env)
    return json.loads(out.stdout) if out.returncode == 0 else []


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

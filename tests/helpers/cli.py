"""The real `agentd` command in a subprocess, as a user runs it, and what a failed one printed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.helpers.port import free_port


def run_agentd(*args: str, env: dict[str, str] | None = None, input: str | None = None, timeout: float = 60):
    """Run the real `agentd` command in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=input,
        timeout=timeout,
    )


def one_error_line(result, *needles: str, code: int = 1) -> str:
    """The one `agentd:` line a failed command printed on stderr, holding each of `needles`."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentd: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def serve_refused(data_dir, what: str):
    """Run `agentd serve` on `data_dir` and return how it ended, expecting it to refuse to start within
    30 s; if it starts, stop it and fail, naming `what` it should have refused."""
    server = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port()), "--model", "smollm2-135m"],
        env={**os.environ, "AGENTD_DATA_DIR": str(data_dir)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if server.poll() is None:
        server.terminate()
        out, err = server.communicate(timeout=60)
        pytest.fail(f"serve started on {what}: {out[-1000:]} {err[-1000:]}")
    out, err = server.communicate()
    return subprocess.CompletedProcess(server.args, server.returncode, out, err)

"""agentd start, status and stop as a user runs them: one daemon per data directory, a clean stop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import free_port


@pytest.mark.slow
def test_start_status_stop(agentd, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = str(free_port())
    # A known model's name is passed on to the detached serve as a name, not as a path under the
    # current folder; the smoke model's trained context is 8,192 tokens.
    started = agentd("start", "--port", port, "--model", "smollm2-135m", timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        assert f"http://127.0.0.1:{port}/" in started.stdout
        status = json.loads(agentd("status", "--json").stdout)
        assert status["running"] and status["pid"] > 0
        assert status["model"]["n_ctx"] == 8192 and status["queue_depth"] == 0
        again = agentd("start", "--port", str(free_port()))
        assert again.returncode != 0 and f"pid {status['pid']}" in again.stderr
        assert len(again.stderr.strip().splitlines()) == 1
    finally:
        stopped = agentd("stop", timeout=150)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    assert json.loads(agentd("status", "--json").stdout)["running"] is False


def test_stop_and_status_when_nothing_runs(agentd) -> None:
    stopped = agentd("stop")
    assert stopped.returncode == 1 and stopped.stderr.startswith("agentd: no agentd is serving")
    assert agentd("db", "upgrade").returncode == 0  # status reads a database; it makes none
    status = agentd("status")
    assert status.returncode == 0 and "not running" in status.stdout

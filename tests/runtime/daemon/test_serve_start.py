"""`agentd serve` while it starts: its address is said once the page takes connections, and a SIGTERM
at any moment of the start stops it as cleanly as one sent later (exit 0, the instance lock released)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

import pytest

from runtime.daemon.lock import holder
from tests.helpers import free_port


def start_serve(data: Path, port: int, blocked: bool = False) -> subprocess.Popen:
    """The real `agentd serve` on the smoke model. `blocked` starts it with SIGTERM blocked, as
    `agentd start` does, so that a SIGTERM sent before agentd's first line runs waits for it."""
    env = {**os.environ, "AGENTD_DATA_DIR": str(data), "AGENTD_MODEL": "smollm2-135m"}
    block = (lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})) if blocked else None
    return subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "serve", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=block,
    )


def until(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def read_until_address(server: subprocess.Popen) -> list[str]:
    """stdout's lines up to and including the one with the page's address."""
    lines: list[str] = []
    while not lines or "web page:" not in lines[-1]:
        line = server.stdout.readline()
        assert line, f"serve ended before it said its address: {server.wait()} {server.stderr.read()[-2000:]}"
        lines.append(line)
    return lines


def stopped(server: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = server.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        server.kill()
        _, err = server.communicate()
        return -9, f"still running 90 s after SIGTERM; {err[-2000:]}"
    return server.returncode, err


def answer(url: str) -> int | str:
    """The HTTP status the page gives, or why there was none."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return f"{type(e).__name__}: {getattr(e, 'reason', e)}"


@pytest.mark.slow
def test_the_address_is_said_only_once_the_page_takes_connections(tmp_path: Path) -> None:
    port = free_port()
    server = start_serve(tmp_path / "data", port)
    try:
        read_until_address(server)
        answers = [answer(f"http://127.0.0.1:{port}/healthz") for _ in range(4)]
    finally:
        server.send_signal(signal.SIGTERM)
        code, err = stopped(server)
    assert all(isinstance(a, int) for a in answers), answers
    assert code == 0, err[-2000:]


def once_it_holds_the_lock(server: subprocess.Popen, data: Path) -> None:
    """The model is loading: the pid file names the process, the page does not serve yet."""
    until(lambda: (holder(data) or (None,))[0] == server.pid)


def while_the_daemon_loads(server: subprocess.Popen, data: Path) -> None:
    """The daemon's modules are being imported, before the instance lock is taken."""
    time.sleep(0.5)


def the_moment_it_says_its_address(server: subprocess.Popen, data: Path) -> None:
    read_until_address(server)


@pytest.mark.slow
@pytest.mark.parametrize(
    "moment", [while_the_daemon_loads, once_it_holds_the_lock, the_moment_it_says_its_address],
    ids=lambda f: f.__name__,
)
def test_sigterm_during_the_start_stops_serve_cleanly(tmp_path: Path, moment) -> None:
    data = tmp_path / "data"
    server = start_serve(data, free_port())
    try:
        moment(server, data)
    finally:
        server.send_signal(signal.SIGTERM)
        code, err = stopped(server)
    assert code == 0, err[-2000:]
    assert "Traceback" not in err
    # Released, not only dropped by the kernel when the process died: a clean stop empties the pid file.
    assert holder(data) is None and (data / "agentd.pid").read_text() == ""


@pytest.mark.slow
def test_a_sigterm_sent_before_serve_runs_a_line_waits_for_it_and_stops_it_cleanly(tmp_path: Path) -> None:
    """A SIGTERM blocked at the spawn (as `agentd start` spawns) is taken once serve can stop cleanly."""
    data = tmp_path / "data"
    server = start_serve(data, free_port(), blocked=True)
    server.send_signal(signal.SIGTERM)
    code, err = stopped(server)
    assert code == 0, err[-2000:]
    assert holder(data) is None

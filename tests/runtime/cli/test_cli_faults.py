"""Faults a user meets on the command line, each reproduced as they met it: a hanging or unreachable
model endpoint, Ctrl-C and SIGTERM during a model call, `task run` beside a daemon, options that did
nothing, notifications nobody will read, and an approval's expiry counted from the wrong moment."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

import anyio
import pytest

from runtime.daemon.lock import InstanceLock
from runtime.errors import InstanceLocked
from runtime.inference.scripted import ScriptedModel
from store import EventStore
from store.events import ApprovalRequested, ModelCalled, RunInterrupted
from tests.helpers import EVERYTHING, REPO, call, free_port, make_runtime, submit, wait_for_port

READ = {"action": "call_tool", "tool": "read_file", "arguments": {"path": "notes.txt"}, "reason": "look"}
ANSWER = {"action": "final_answer", "answer": "March 3", "sources": ["notes.txt"]}
WAITING = "waiting for the model call to finish (Ctrl-C again to stop now)"
PHASES = "submitted, running, awaiting_approval, waiting_for_user, completed, failed, cancelled"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A data directory and a workspace with notes.txt in it; the smoke model's file for its template."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    return {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_WORKSPACE": str(ws), "AGENTD_N_CTX": "8192",
            "AGENTD_MODEL": "smollm2-135m"}


@pytest.fixture
def endpoint(tmp_path: Path, env: dict[str, str]) -> Iterator:
    """Starts the scripted model endpoint (tests/helpers/model_server.py) with its replies and its delay before
    each reply, and gives `env` pointing at it; a delay of an hour is an endpoint that never answers."""
    started: list[subprocess.Popen] = []

    def start(replies: list, delay_s: float = 0.0) -> dict[str, str]:
        script = tmp_path / f"script-{len(started)}.json"
        script.write_text(json.dumps({"delay_s": delay_s, "replies": replies}))
        port = free_port()
        started.append(subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.model_server", str(port), str(script)], cwd=REPO
        ))
        wait_for_port(port)
        return {**env, "AGENTD_MODEL_URL": f"http://127.0.0.1:{port}"}

    yield start
    for process in started:
        process.kill()
        process.wait()


def submitted(agentd, env: dict, *args: str, goal: str = "When is the release?") -> str:
    out = agentd("task", "submit", *args, goal, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def stream(env: dict, task_id: str) -> list:
    with EventStore(f"sqlite:///{Path(env['AGENTD_DATA_DIR']) / 'agentd.db'}") as store:
        return [r.event for r in store.read_stream(task_id)]


class Running:
    """An agentd command in a subprocess whose stderr is read line by line as it comes."""

    def __init__(self, env: dict, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", *args], env={**os.environ, **env},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            self.stderr.append(line)
            if text in line:
                return line
        raise AssertionError(f"no {text!r} on stderr within {timeout} s; saw {self.stderr}")

    def ended(self, timeout: float) -> tuple[int, str, float]:
        """(exit code, stdout, seconds it took) once the process ends; killed if it takes longer."""
        started = time.monotonic()
        try:
            out, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise AssertionError(f"still running {timeout} s later; stderr: {self.stderr}") from None
        return self.process.returncode, out, time.monotonic() - started

    def signalled(self, sig: int, timeout: float) -> tuple[int, str, float]:
        self.process.send_signal(sig)
        return self.ended(timeout)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


# -- task run beside a daemon ----------------------------------------------------------------------


def test_task_run_refuses_a_data_directory_a_daemon_serves_and_names_its_pid(agentd, env) -> None:
    task_id = submitted(agentd, env)
    data = Path(env["AGENTD_DATA_DIR"])
    with InstanceLock(data):  # what `agentd serve` holds while it serves
        ran = agentd("task", "run", task_id, env=env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ran.stderr.splitlines() == [
        f"agentd: an agentd (pid {os.getpid()}) serves {data} and runs its tasks itself: "
        f"follow this one with `agentd task show {task_id}`, or stop it first"
    ]
    assert [type(e).__name__ for e in stream(env, task_id)] == ["TaskSubmitted"], "the task was not touched"


@pytest.mark.slow
def test_a_daemon_cannot_take_a_data_directory_while_task_run_runs_a_task_there(agentd, endpoint) -> None:
    env = endpoint([READ, ANSWER], delay_s=3.0)
    task_id = submitted(agentd, env)
    with Running(env, "task", "run", task_id) as run:
        run.wait_for("step 1: deciding", timeout=60)
        with pytest.raises(InstanceLocked, match="an `agentd task run` is running tasks in"):
            InstanceLock(Path(env["AGENTD_DATA_DIR"])).acquire()
        code, out, _ = run.ended(timeout=60)
    assert (code, out.splitlines()[0]) == (0, f"{task_id} completed"), run.stderr


# -- options and commands that did nothing ----------------------------------------------------------


def test_task_list_refuses_an_unknown_phase_and_names_the_phases(agentd, env) -> None:
    listed = agentd("task", "list", "--phase", "bogus", env=env)
    assert (listed.returncode, listed.stdout) == (2, "")
    assert listed.stderr.splitlines() == [
        f"agentd: Invalid value for '--phase': 'bogus' is not a phase: {PHASES} (see `agentd task list --help`)"
    ]
    submitted(agentd, env)  # a listing reads a database; it makes none
    assert agentd("task", "list", "--phase", "cancelled", env=env).returncode == 0


def test_task_show_prompt_without_manifest_is_a_usage_error(agentd, env) -> None:
    task_id = submitted(agentd, env)
    shown = agentd("task", "show", task_id, "--prompt", env=env)
    assert (shown.returncode, shown.stdout) == (2, "")
    assert shown.stderr.splitlines() == [
        "agentd: --prompt needs --manifest N: the call whose prompt to print (see `agentd task show --help`)"
    ]


def test_a_notification_to_a_finished_task_is_refused(agentd, env) -> None:
    task_id = submitted(agentd, env)
    assert agentd("task", "cancel", task_id, "--reason", "not needed", env=env).returncode == 0
    sent = agentd("notifications", "send", task_id, "switch to read-only", env=env)
    assert sent.returncode == 1
    assert sent.stderr.splitlines() == [
        f"agentd: task {task_id} is cancelled: it takes no more requests, so a notification would never reach one"
    ]
    assert agentd("notifications", "list", "--json", env=env).stdout.strip() == "[]"


def test_notifications_left_for_a_task_that_finished_do_not_count_in_the_queue_depth(agentd, env) -> None:
    task_id = submitted(agentd, env)
    assert agentd("notifications", "send", task_id, "switch to read-only", env=env).returncode == 0
    assert json.loads(agentd("status", "--json", env=env).stdout)["queue_depth"] == 1
    assert agentd("task", "cancel", task_id, env=env).returncode == 0
    assert json.loads(agentd("status", "--json", env=env).stdout)["queue_depth"] == 0


# -- an approval's expiry ---------------------------------------------------------------------------


def test_an_approvals_expiry_counts_from_its_request_not_from_the_start_of_the_decision(
    store, tmp_path: Path
) -> None:
    class Slow(ScriptedModel):
        def complete(self, prompt, **kw):
            time.sleep(1.5)  # the decision's model call takes its time before the approval is requested
            return super().complete(prompt, **kw)

    ws = tmp_path / "ws"
    ws.mkdir()
    rt = make_runtime(store, Slow([call("shell", command="date")]), tmp_path)
    rt.approval_ttl = timedelta(seconds=60)
    task_id = submit(store, ws, allowed_effects=EVERYTHING)
    from runtime.agent.loop import run_task

    assert anyio.run(lambda: run_task(rt, task_id)) == "awaiting_approval"
    [requested] = [r for r in store.read_stream(task_id) if isinstance(r.event, ApprovalRequested)]
    ttl = datetime.fromisoformat(requested.event.expires_at) - datetime.fromisoformat(requested.recorded_at)
    assert abs(ttl - timedelta(seconds=60)) < timedelta(seconds=0.5), ttl


# -- a model endpoint that hangs or takes no connection ---------------------------------------------


@pytest.mark.slow
def test_a_model_endpoint_that_never_answers_fails_the_task_with_the_reason_after_the_read_timeout(
    agentd, endpoint
) -> None:
    env = {**endpoint([ANSWER], delay_s=3600), "AGENTD_MODEL_READ_TIMEOUT_S": "2"}
    task_id = submitted(agentd, env)
    started = time.monotonic()
    ran = agentd("task", "run", task_id, env=env, timeout=120)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert time.monotonic() - started < 60
    url = env["AGENTD_MODEL_URL"]
    assert ran.stdout.splitlines() == [
        f"{task_id} failed",
        f"failed: the model failed: {url}/v1/completions sent nothing for 2 s (model_read_timeout_s)",
    ]


@pytest.mark.slow
def test_a_model_endpoint_that_takes_no_connection_is_reported_after_the_connect_timeout(agentd, env) -> None:
    # A listening socket whose one-place backlog is full: the kernel drops further connection attempts,
    # as it does for a server that is wedged or a host that is gone.
    with socket.socket() as server, socket.socket() as first:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        first.connect(server.getsockname())
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        task_id = submitted(agentd, env)
        started = time.monotonic()
        ran = agentd("task", "run", task_id, env={**env, "AGENTD_MODEL_URL": url,
                                                   "AGENTD_MODEL_CONNECT_TIMEOUT_S": "1"}, timeout=120)
        took = time.monotonic() - started
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ran.stderr.splitlines() == [
        f"agentd: {url}/props did not take a connection within 1 s (model_connect_timeout_s)"
    ]
    assert took < 30


def test_the_model_timeouts_are_settings_with_defaults_for_a_local_server() -> None:
    from runtime.config import load_settings

    defaults = load_settings(environ={})
    assert (defaults.model_connect_timeout_s, defaults.model_read_timeout_s) == (5.0, 300.0)
    given = load_settings(environ={"AGENTD_MODEL_CONNECT_TIMEOUT_S": "0.5", "AGENTD_MODEL_READ_TIMEOUT_S": "30"})
    assert (given.model_connect_timeout_s, given.model_read_timeout_s) == (0.5, 30.0)


# -- stopping during a model call -------------------------------------------------------------------


def wait_for_event(env: dict, task_id: str, kind: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(Path(env["AGENTD_DATA_DIR"]) / "agentd.db") and any(
            type(e).__name__ == kind for e in stream(env, task_id)
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"no {kind} for {task_id} within {timeout} s")


def interrupted_in_its_first_call(env: dict, task_id: str) -> None:
    events = stream(env, task_id)
    assert isinstance(events[-1], RunInterrupted), [type(e).__name__ for e in events]
    assert not any(isinstance(e, ModelCalled) for e in events), "the abandoned call recorded nothing"


@pytest.mark.slow
def test_serve_stops_within_seconds_of_sigterm_during_a_hung_model_call_and_records_the_interruption(
    agentd, endpoint
) -> None:
    env = {**endpoint([ANSWER], delay_s=3600), "AGENTD_PORT": str(free_port())}
    task_id = submitted(agentd, env)
    with Running(env, "serve") as daemon:
        wait_for_event(env, task_id, "WorkspaceSurveyed", timeout=60)
        time.sleep(1.5)  # the request is built and sent: the call hangs in the endpoint
        code, _, took = daemon.signalled(signal.SIGTERM, timeout=20)
    assert code == 0, daemon.stderr
    assert took < 10
    interrupted_in_its_first_call(env, task_id)


@pytest.mark.slow
def test_ctrl_c_in_task_run_abandons_a_hung_model_call_and_records_the_interruption(agentd, endpoint) -> None:
    env = endpoint([ANSWER], delay_s=3600)
    task_id = submitted(agentd, env)
    with Running(env, "task", "run", task_id) as run:
        run.wait_for("step 1: evaluating", timeout=60)
        code, out, took = run.signalled(signal.SIGINT, timeout=20)
    assert code == 130, run.stderr
    assert took < 10
    assert out.splitlines() == [f"{task_id} running", f"interrupted (agentd task run {task_id} goes on)"]
    interrupted_in_its_first_call(env, task_id)


# A request of several thousand tokens: the smoke model takes seconds over it even on a fast machine.
LONG_GOAL = "Say which of these lines differs from the others.\n" + "".join(
    f"line {n}: the release is planned for March 3, owner Ana, status green\n" for n in range(90)
)


def interrupted_during_a_long_local_call(agentd, env: dict) -> tuple[str, Running]:
    """`task run` on the local model, given Ctrl-C while it evaluates a long prompt; it has said what
    it waits for."""
    task_id = submitted(agentd, env, goal=LONG_GOAL)
    run = Running(env, "task", "run", task_id)
    with contextlib.ExitStack() as on_failure:
        on_failure.enter_context(run)
        run.wait_for("step 1: evaluating", timeout=120)
        run.process.send_signal(signal.SIGINT)
        run.wait_for(WAITING, timeout=5)
        on_failure.pop_all()
    return task_id, run


@pytest.mark.slow
def test_ctrl_c_during_a_long_local_model_call_says_it_waits_for_the_call_then_stops(agentd, env) -> None:
    task_id, run = interrupted_during_a_long_local_call(agentd, env)
    with run:
        code, out, _ = run.ended(timeout=120)
    assert code == 130, run.stderr
    assert out.splitlines()[-1] == f"interrupted (agentd task run {task_id} goes on)"
    interrupted_in_its_first_call(env, task_id)


@pytest.mark.slow
def test_a_second_ctrl_c_stops_task_run_at_once_during_a_long_local_model_call(agentd, env) -> None:
    task_id, run = interrupted_during_a_long_local_call(agentd, env)
    with run:
        code, _, took = run.signalled(signal.SIGINT, timeout=30)
    assert (code, took < 3) == (130, True), run.stderr
    interrupted_in_its_first_call(env, task_id)

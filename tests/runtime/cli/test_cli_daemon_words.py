"""What the CLI says of the daemon: `task submit` with none to run the task names the commands that
would, `task show` says what an unfinished task is doing now as its page does, and `status` is read
as lines of words."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from runtime.daemon.lock import InstanceLock
from tests.helpers import REPO, free_port


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    return {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_WORKSPACE": str(ws)}


def until(check: Callable[[], object], timeout: float = 60) -> object:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return found


def listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def endpoint(tmp_path: Path, env: dict[str, str]) -> Iterator[Callable[[list, float], dict[str, str]]]:
    """Starts the scripted model endpoint with its replies and delay; gives `env` pointing at it."""
    started: list[subprocess.Popen] = []

    def start(replies: list, delay_s: float = 0.0) -> dict[str, str]:
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"delay_s": delay_s, "replies": replies}))
        port = free_port()
        started.append(subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.model_server", str(port), str(script)], cwd=REPO
        ))
        until(lambda: listens(port))
        # The endpoint tokenizes with the smoke model, so agentd takes its chat template from the same file.
        return {**env, "AGENTD_MODEL_URL": f"http://127.0.0.1:{port}", "AGENTD_MODEL": "smollm2-135m",
                "AGENTD_N_CTX": "8192"}

    yield start
    for process in started:
        process.kill()
        process.wait()


READ = {"action": "call_tool", "tool": "read_file", "arguments": {"path": "notes.txt"}, "reason": "look"}
ANSWER = {"action": "final_answer", "answer": "March 3", "sources": ["notes.txt"]}


def now_line(shown: str) -> str | None:
    """The value of `task show`'s `now` field, or None when it has none."""
    found = re.search(r"^now +(.*)$", shown, re.MULTILINE)
    return found.group(1) if found else None


# --- task submit -------------------------------------------------------------------------------------


def test_submit_with_no_daemon_says_so_on_stderr_and_keeps_stdout_the_bare_id(agentd, env) -> None:
    submitted = agentd("task", "submit", "When is the release?", env=env)
    assert submitted.returncode == 0, submitted.stderr
    task_id = submitted.stdout.strip()
    assert submitted.stdout == f"{task_id}\n" and re.fullmatch(r"t-[0-9a-f]+", task_id)
    data = Path(env["AGENTD_DATA_DIR"]).resolve()
    assert submitted.stderr == (
        f"no agentd serves {data}: `agentd serve` (or `agentd start`) runs this task, "
        f"or `agentd task run {task_id}` in the foreground\n"
    )
    assert json.loads(agentd("task", "show", task_id, "--json", env=env).stdout)["summary"]["phase"] == "submitted"


def test_submit_as_json_is_unchanged_with_no_daemon(agentd, env) -> None:
    submitted = agentd("task", "submit", "--json", "When is the release?", env=env)
    assert submitted.returncode == 0 and submitted.stderr == ""
    assert set(json.loads(submitted.stdout)) == {"task_id", "seq"}


def test_submit_says_nothing_more_while_an_agentd_holds_the_data_folder(agentd, env) -> None:
    with InstanceLock(Path(env["AGENTD_DATA_DIR"])) as lock:
        lock.announce(f"http://127.0.0.1:{free_port()}/")
        submitted = agentd("task", "submit", "When is the release?", env=env)
    assert submitted.returncode == 0 and submitted.stderr == "", submitted.stderr


# --- task show ---------------------------------------------------------------------------------------


def test_show_of_a_task_no_agentd_serves_says_it_waits_and_what_would_run_it(agentd, env) -> None:
    task_id = agentd("task", "submit", "When is the release?", env=env).stdout.strip()
    shown = agentd("task", "show", task_id, env=env)
    assert shown.returncode == 0, shown.stderr
    assert now_line(shown.stdout) == (
        f"waiting to start; no agentd serves {Path(env['AGENTD_DATA_DIR']).resolve()}: `agentd serve` "
        f"(or `agentd start`) runs this task, or `agentd task run {task_id}` in the foreground"
    )
    # As the task was at an earlier event, there is no telling what it was doing that moment.
    assert now_line(agentd("task", "show", task_id, "--at", "1", env=env).stdout) is None


@pytest.mark.slow
def test_show_of_a_task_stopped_between_decisions_says_its_last_step_from_the_log(agentd, endpoint) -> None:
    env = endpoint([READ, ANSWER])
    task_id = agentd("task", "submit", "When is the release?", env=env).stdout.strip()
    ran = agentd("task", "run", task_id, "--max-decisions", "1", env=env)
    assert ran.returncode == 0, ran.stderr
    said = now_line(agentd("task", "show", task_id, env=env).stdout)
    assert said is not None, "no now line"
    assert said.startswith("between decisions (after step 1: called read_file notes.txt -> ok); "), said
    assert f"`agentd task run {task_id}`" in said
    agentd("task", "run", task_id, env=env)
    finished = agentd("task", "show", task_id, env=env)
    assert "phase        completed" in finished.stdout and now_line(finished.stdout) is None


@pytest.mark.slow
def test_show_of_a_task_the_daemon_is_deciding_gives_the_stage_the_page_shows(agentd, endpoint) -> None:
    # Each reply takes 3 s: long enough to find the decision under way.
    env = endpoint([READ, READ, READ, ANSWER], delay_s=3.0)
    task_id = agentd("task", "submit", "When is the release?", env=env).stdout.strip()
    server = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        said = until(lambda: (line := now_line(agentd("task", "show", task_id, env=env).stdout)) and
                     re.match(r"step \d+: ", line) and line)
        assert re.fullmatch(r"step \d+: (deciding|evaluating .*|generating .*|running .*)", said), said
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
    assert server.returncode == 0, err[-2000:]


# --- status ------------------------------------------------------------------------------------------


def test_status_of_no_agentd_says_what_would_start_one(agentd, env) -> None:
    agentd("task", "submit", "When is the release?", env=env)
    status = agentd("status", env=env)
    assert status.returncode == 0, status.stderr
    first = status.stdout.splitlines()[0]
    assert re.split(r"\s{2,}", first) == [
        "agentd", "not running (`agentd serve` runs it here, `agentd start` in the background)"
    ]
    assert "running now" not in status.stdout and "1 submitted" in status.stdout


@pytest.mark.slow
def test_status_of_a_running_agentd_says_the_model_state_in_words(agentd, env) -> None:
    port = free_port()
    started = agentd("start", "--port", str(port), "--model", "smollm2-135m", env=env, timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        status = agentd("status", env=env)
        as_json = json.loads(agentd("status", "--json", env=env).stdout)
    finally:
        agentd("stop", env=env, timeout=150)
    assert status.returncode == 0, status.stderr
    fields = {k: v.strip() for k, v in (re.split(r"\s{2,}", line, maxsplit=1) for line in status.stdout.splitlines())}
    assert fields["agentd"] == f"running (pid {as_json['pid']}), its page at http://127.0.0.1:{port}/"
    assert fields["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf, context 8,192 tokens"
    assert fields["model holds"] == "no task's tokens"
    assert re.fullmatch(
        r"0 saved task states, 0\.0 MiB of [\d,.]+ MiB; 0 hits, 0 misses, 0 evicted, 0 too large to keep",
        fields["kv cache"],
    )
    # Words, not a mapping printed as it is: no braces, no None.
    assert not re.search(r"[{}]|None", status.stdout), status.stdout
    # The JSON a script reads keeps its shape.
    assert as_json["model"]["kv_cache"]["entries"] == 0 and as_json["running"] is True

"""`agentd task run` as a person at a terminal or a script meets it: decisions as they happen, the
outcome in one line, an exit code that says whether the task did what it was asked; and `task submit --context`."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from runtime.agent.plugins import load
from runtime.agent.progress import Progress
from runtime.cli._watch import Watch, bar
from tests.helpers import REPO, free_port, wait_for_port


def a_decision(step: int = 3) -> list[Progress]:
    """One decision's reports, as the loop and the model make them: a tool call that went well."""
    p = lambda stage, done=0, total=0, detail="": Progress("t-1", step, stage, done, total, detail)  # noqa: E731  a shorthand for the list below
    return [
        p("deciding"),
        p("evaluating", 0, 2400),
        p("evaluating", 1840, 2400),
        p("evaluating", 2400, 2400),
        p("generating", 1, 256),
        p("generating", 37, 256),
        p("running_tool", detail="list_files"),
        p("decided", detail="called list_files -> ok"),
    ]


def test_a_terminal_gets_a_line_per_decision_and_the_stage_redrawn_in_place() -> None:
    out = io.StringIO()
    watch = Watch(out, tty=True)
    shown = []
    for report in a_decision():
        watch(report)
        shown.append(out.getvalue())
    screen = out.getvalue()
    assert screen.startswith("step 3: deciding\n")
    # Each stage redraws the one status line: a carriage return, never a new line, until the outcome.
    live = shown[3][len(shown[0]) :]
    assert "\n" not in live and live.count("\r") == 3
    assert f"\revaluating 1,840 of 2,400 prompt tokens {bar(1840, 2400)}" in screen
    assert bar(1840, 2400) == "[" + "#" * 18 + "." * 6 + "]"
    assert "\rgenerating 37 of at most 256 tokens" in screen and "\rrunning list_files" in screen
    # The outcome wipes the status line and stays.
    assert screen.endswith("\r" + " " * len("running list_files") + "\rstep 3: called list_files -> ok\n")
    watch.close()
    assert out.getvalue() == screen, "nothing to take away once the decision's line is printed"


def test_a_pipe_gets_one_plain_line_per_stage_and_no_bars() -> None:
    out = io.StringIO()
    watch = Watch(out, tty=False)
    for report in a_decision():
        watch(report)
    watch.close()
    assert out.getvalue().splitlines() == [
        "step 3: deciding",
        "step 3: evaluating a prompt of 2,400 tokens, 0 of them cached",
        "step 3: generating (at most 256 tokens)",
        "step 3: running list_files",
        "step 3: called list_files -> ok",
    ]
    assert "\r" not in out.getvalue() and "#" not in out.getvalue()


def test_the_status_line_is_taken_away_when_the_run_ends_mid_stage() -> None:
    out = io.StringIO()
    watch = Watch(out, tty=True)
    for report in a_decision()[:5]:
        watch(report)
    watch.close()
    assert out.getvalue().endswith("\r" + " " * len("generating 1 of at most 256 tokens") + "\r")


# -- the command, on the scripted model endpoint -------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A data directory and a workspace with notes.txt in it; no model."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    return {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_WORKSPACE": str(ws), "AGENTD_N_CTX": "8192"}


@pytest.fixture
def endpoint(tmp_path: Path, env: dict[str, str]) -> Iterator:
    """A function that starts the scripted model endpoint with its replies and gives `env` pointing at it."""
    started: list[subprocess.Popen] = []

    def start(replies: list) -> dict[str, str]:
        script = tmp_path / "script.json"
        script.write_text(json.dumps({"delay_s": 0.0, "replies": replies}))
        port = free_port()
        started.append(subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.model_server", str(port), str(script)], cwd=REPO
        ))
        wait_for_port(port)
        # The endpoint tokenizes with the smoke model, so agentd takes its chat template from the same file.
        return {**env, "AGENTD_MODEL_URL": f"http://127.0.0.1:{port}", "AGENTD_MODEL": "smollm2-135m"}

    yield start
    for process in started:
        process.kill()
        process.wait()


def submitted(agentd, env: dict, *args: str) -> str:
    out = agentd("task", "submit", *args, "When is the release?", env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def read(path: str) -> dict:
    return {"action": "call_tool", "tool": "read_file", "arguments": {"path": path}, "reason": "look"}


ANSWER = {"action": "final_answer", "answer": "March 3", "sources": ["notes.txt"]}


@pytest.mark.slow
def test_task_run_exits_zero_and_says_the_answer_when_the_task_completed(agentd, endpoint) -> None:
    env = endpoint([read("notes.txt"), ANSWER])
    task_id = submitted(agentd, env)
    ran = agentd("task", "run", task_id, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [f"{task_id} completed", "answer: March 3 (sources: notes.txt)"]


@pytest.mark.slow
def test_task_run_stopped_by_max_decisions_exits_zero_and_says_how_to_go_on(agentd, endpoint) -> None:
    env = endpoint([read("notes.txt"), ANSWER])
    task_id = submitted(agentd, env)
    ran = agentd("task", "run", task_id, "--max-decisions", "1", env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        f"{task_id} running", f"stopped after 1 decision (agentd task run {task_id} goes on)"
    ]
    again = agentd("task", "run", task_id, env=env)
    assert again.returncode == 0 and again.stdout.splitlines()[0] == f"{task_id} completed", again.stderr


@pytest.mark.slow
def test_task_run_exits_non_zero_when_the_task_failed(agentd, endpoint) -> None:
    env = endpoint([read("notes.txt"), ANSWER])
    task_id = submitted(agentd, env, "--max-tokens", "1")
    ran = agentd("task", "run", task_id, env=env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ran.stdout.splitlines()[0] == f"{task_id} failed"
    assert ran.stdout.splitlines()[1].startswith("failed: token cap reached")


@pytest.mark.slow
def test_task_run_exits_non_zero_when_the_task_escalated(agentd, endpoint, tmp_path: Path) -> None:
    # The support profile hands cases to staff once something went wrong (here another tenant's account
    # was refused); the workspace profile has no escalation to give.
    accounts = tmp_path / "accounts.json"
    accounts.write_text((REPO / "examples" / "support_agent" / "accounts.json").read_text())
    check = {"action": "call_tool", "tool": "check_api_key_status", "arguments": {"account_id": "A-456"}}
    env = {**endpoint([check, {"action": "escalate", "reason": "a person must decide this"}]),
           "AGENTD_PLUGINS": str(REPO / "examples" / "support_agent" / "plugin.py"),
           "SUPPORT_AGENT_ACCOUNTS": str(accounts)}
    task_id = submitted(agentd, env, "--profile", "support", "--tenant", "acme")
    ran = agentd("task", "run", task_id, env=env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == [f"{task_id} completed", "escalated: a person must decide this"]


@pytest.mark.slow
def test_task_run_exits_non_zero_when_the_task_was_cancelled(agentd, endpoint) -> None:
    env = endpoint([ANSWER])
    task_id = submitted(agentd, env)
    assert agentd("task", "cancel", task_id, "--reason", "not needed", env=env).returncode == 0
    ran = agentd("task", "run", task_id, env=env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ran.stdout.splitlines() == [f"{task_id} cancelled", "cancelled: not needed"]


@pytest.mark.slow
def test_task_run_exits_zero_and_says_so_when_the_task_waits_for_approval(agentd, endpoint) -> None:
    shell = {"action": "call_tool", "tool": "shell", "arguments": {"command": "date"}, "reason": "check"}
    env = endpoint([shell])
    task_id = submitted(agentd, env, "--allow", "external")
    ran = agentd("task", "run", task_id, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        f"{task_id} awaiting_approval", "waiting: shell needs approval (agentd approvals list)"
    ]


@pytest.mark.slow
def test_task_submit_context_pairs_reach_the_task(agentd, env) -> None:
    task_id = submitted(agentd, env, "--context", "account_id=a-123", "--context", "plan=pro=plus")
    out = agentd("events", "list", "--task", task_id, "--type", "TaskSubmitted", "--json", env=env)
    assert json.loads(out.stdout.splitlines()[0])["payload"]["context"] == {"account_id": "a-123", "plan": "pro=plus"}


@pytest.mark.slow
@pytest.mark.parametrize("pair", ["account_id", "=a-123", "account_id=", "account id=a-1"])
def test_a_malformed_context_pair_is_a_one_line_usage_error(agentd, env, pair: str) -> None:
    out = agentd("task", "submit", "--context", pair, "When is the release?", env=env)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"agentd: Invalid value for '--context': {pair!r} is not KEY=VALUE "
        "(a key of letters, digits, _ . -, and a value) (see `agentd task submit --help`)"
    ]
    assert not (Path(env["AGENTD_DATA_DIR"]) / "agentd.db").exists(), "nothing was submitted"


@pytest.mark.slow
def test_a_context_key_given_twice_is_a_usage_error(agentd, env) -> None:
    out = agentd("task", "submit", "--context", "a=1", "--context", "a=2", "When?", env=env)
    assert (out.returncode, out.stderr) == (
        2, "agentd: Invalid value for '--context': 'a' is given twice (see `agentd task submit --help`)\n"
    )


@pytest.mark.slow
def test_task_run_shows_each_decision_as_it_happens_on_stderr(agentd, endpoint) -> None:
    env = endpoint([read("notes.txt"), ANSWER])
    task_id = submitted(agentd, env)
    ran = agentd("task", "run", task_id, env=env)
    assert ran.returncode == 0, ran.stderr
    calls = json.loads(agentd("task", "show", task_id, "--calls", "--json", env=env).stdout)
    assert len(calls) == 2
    first, second = (c["prompt_tokens"] for c in calls)
    most = load([]).profiles["workspace"].max_output_tokens
    # Not a terminal: a plain line as each stage begins, no bars, no redraws.
    assert [line for line in ran.stderr.splitlines() if line.startswith("step ")] == [
        "step 1: deciding",
        f"step 1: evaluating a prompt of {first:,} tokens, 0 of them cached",
        f"step 1: generating (at most {most:,} tokens)",
        "step 1: running read_file",
        "step 1: called read_file notes.txt -> ok",
        "step 2: deciding",
        f"step 2: evaluating a prompt of {second:,} tokens, 0 of them cached",
        f"step 2: generating (at most {most:,} tokens)",
        "step 2: answered",
    ]
    assert "\r" not in ran.stderr
    assert ran.stdout.splitlines() == [f"{task_id} completed", "answer: March 3 (sources: notes.txt)"]

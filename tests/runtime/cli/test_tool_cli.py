"""`agentd tool run`: one call through a task's executor, by hand, with its bad input said in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.sandbox import Sandbox
from tests.helpers import one_error_line

SANDBOX = Sandbox().problem()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orders.csv").write_text("id,amount\n1,12.50\n2,8.00\n")
    return ws


def tool_run(agentd, tmp_path: Path, *args: str):
    return agentd("--data-dir", str(tmp_path / "data"), "tool", "run", *args)


def test_a_read_call_prints_the_observation_a_model_would_get(agentd, tmp_path: Path, folder: Path) -> None:
    result = tool_run(agentd, tmp_path, "read_file", "--workspace", str(folder), "--args", '{"path": "orders.csv"}')
    assert result.returncode == 0, result.stderr
    observation = json.loads(result.stdout)
    assert (observation["status"], observation["data_rows"]) == ("ok", 2)


@pytest.mark.skipif(SANDBOX is not None, reason=f"no sandbox: {SANDBOX}")
def test_python_computes_over_the_workspace_in_its_sandbox(agentd, tmp_path: Path, folder: Path) -> None:
    code = "import csv\nprint(sum(float(r['amount']) for r in csv.DictReader(open('orders.csv'))))"
    result = tool_run(agentd, tmp_path, "python", "--workspace", str(folder), "--args", json.dumps({"code": code}))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stdout"] == "20.5\n"


def test_a_tool_that_needs_approval_runs_only_with_yes(agentd, tmp_path: Path, folder: Path) -> None:
    args = ("shell", "--workspace", str(folder), "--args", '{"command": "echo made > made.txt"}')
    one_error_line(tool_run(agentd, tmp_path, *args), "needs a person's approval", "--yes", code=2)
    assert not (folder / "made.txt").exists()
    assert tool_run(agentd, tmp_path, *args, "--yes").returncode == 0
    assert (folder / "made.txt").read_text() == "made\n"


def test_a_call_that_fails_prints_why_and_exits_1(agentd, tmp_path: Path, folder: Path) -> None:
    result = tool_run(agentd, tmp_path, "read_file", "--workspace", str(folder), "--args", '{"path": "../x"}')
    assert result.returncode == 1
    assert json.loads(result.stdout)["status"] in ("refused", "error")
    result = tool_run(agentd, tmp_path, "read_file", "--workspace", str(folder), "--args", "{}")
    assert result.returncode == 1 and json.loads(result.stdout)["status"] == "invalid_arguments"


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["nope"], ["no tool 'nope'", "read_file"]),
        (["read_file", "--args", "{path"], ["--args is not JSON"]),
        (["read_file", "--args", "[1]"], ["JSON object"]),
        (["read_file", "--workspace", "/no/such/folder", "--args", '{"path": "a"}'], ["no such folder"]),
    ],
)
def test_a_call_that_cannot_be_made_is_one_line_and_exit_2(agentd, tmp_path: Path, args: list[str],
                                                           needles: list[str]) -> None:
    one_error_line(tool_run(agentd, tmp_path, *args), *needles, code=2)
    assert not (tmp_path / "data").exists(), "nothing was made"


def test_status_says_whether_the_python_tool_is_offered_and_why_not(agentd, tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert agentd("--data-dir", str(data), "db", "upgrade").returncode == 0
    shown = agentd("--data-dir", str(data), "status")
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if line.startswith("python tool"))
    assert ("available, in a bubblewrap sandbox" in line) is (SANDBOX is None)
    assert json.loads(agentd("--data-dir", str(data), "status", "--json").stdout)["python_sandbox"] == (SANDBOX or "ok")

"""Re-running a task on its recorded model outputs: same code, same requests; changed code, named step."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from runtime.agent.loop import run_task
from runtime.agent.profiles import WORKSPACE
from runtime.agent.rerun import rerun_recorded
from runtime.inference.scripted import ScriptedModel
from store import EventStore
from tests.helpers import answer, call, make_runtime, submit

REPLIES = [call("read_log", path="notes.txt"), call("read_file", path="notes.txt"), answer("March 3", "notes.txt")]


def record(tmp_path: Path, model: ScriptedModel):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    with EventStore(f"sqlite:///{tmp_path / 'agentd.db'}") as store:
        rt = make_runtime(store, model, tmp_path)
        task_id = submit(store, ws)
        assert anyio.run(lambda: run_task(rt, task_id)) == "completed"
        yield store, task_id, tmp_path


@pytest.fixture
def recorded(tmp_path: Path):
    """A task recorded on a scripted model; re-run here with one that renders and counts the same way."""
    yield from record(tmp_path, ScriptedModel(REPLIES))


@pytest.fixture
def recorded_on_the_smoke_model(tmp_path: Path, model):
    """A task whose prompts were rendered and counted by the smoke model, which `agentd replay` loads."""
    yield from record(tmp_path, ScriptedModel(REPLIES, like=model))


def test_rerunning_with_unchanged_code_matches_every_call(recorded) -> None:
    store, task_id, tmp_path = recorded
    report = rerun_recorded(make_runtime(store, ScriptedModel([]), tmp_path), task_id)
    assert (report.calls, report.difference) == (3, None)


def test_a_changed_instruction_is_reported_at_the_first_step_with_the_block_that_changed(recorded) -> None:
    store, task_id, tmp_path = recorded
    edited = WORKSPACE.model_copy(update={"policy": (*WORKSPACE.policy, "Always answer in French.")})
    report = rerun_recorded(make_runtime(store, ScriptedModel([]), tmp_path, profiles={"workspace": edited}), task_id)
    assert report.difference is not None
    assert (report.difference.call_index, report.difference.attempt) == (1, 1)
    assert "'policy'" in report.difference.what


def test_a_changed_validation_is_reported_as_a_different_outcome(recorded, monkeypatch) -> None:
    store, task_id, tmp_path = recorded
    from runtime.agent import proposal

    # Today's code forgets to check tool names: the refused read_log call would now be accepted.
    monkeypatch.setattr(proposal, "validate", lambda action, **kw: action)
    report = rerun_recorded(make_runtime(store, ScriptedModel([]), tmp_path), task_id)
    assert report.difference is not None
    assert (report.difference.call_index, report.difference.attempt) == (1, 1)
    assert "outcome differs: recorded rejected: there is no tool 'read_log'" in report.difference.what


def test_the_cli_exits_non_zero_naming_the_step(recorded_on_the_smoke_model, agentd) -> None:
    store, task_id, tmp_path = recorded_on_the_smoke_model
    ok = agentd("replay", "--task", task_id, "--recorded",
                env={"AGENTD_DATABASE_URL": f"sqlite:///{tmp_path / 'agentd.db'}",
                     "AGENTD_DATA_DIR": str(tmp_path / "data"),
                         "AGENTD_MODEL": "smollm2-135m"})
    assert ok.returncode == 0, ok.stderr
    assert "every manifest and outcome matches" in ok.stdout
    missing = agentd("replay", "--recorded")
    assert missing.returncode == 2 and "--task" in missing.stderr

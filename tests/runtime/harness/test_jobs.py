"""Background jobs: started at once, recorded before they run, reported to their task when they end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from notifications import queue
from runtime.agent.loop import run_task
from runtime.agent.profiles import WORKSPACE
from runtime.artifacts import ArtifactStore
from runtime.harness.jobs import MARKER, UNKNOWN, JobRunner, StartJob, register_jobs
from runtime.tools import ToolContext, ToolRegistry, execute
from store import EventStore
from store.events import (
    ApprovalGranted,
    ApprovalRequested,
    JobFinished,
    JobStarted,
    NotificationsAdmitted,
    TaskPhase,
    TaskPhaseChanged,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)
from tests.helpers import EVERYTHING, REPO, answer, call, events, scripted, submit


def make_runner(store: EventStore, tmp_path: Path, **kw) -> JobRunner:
    return JobRunner(store, ArtifactStore(tmp_path / "artifacts"), tmp_path / "jobs", **kw)


@pytest.fixture
def runner(store, tmp_path: Path):
    r = make_runner(store, tmp_path, max_runtime_s=30)
    yield r
    r.close()


def running_task(store: EventStore, workspace: Path) -> str:
    task_id = submit(store, workspace, allowed_effects=EVERYTHING)
    store.append(task_id, [TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="started")])
    return task_id


def start_job(store: EventStore, runner: JobRunner, task_id: str, workspace: Path, command: str, *,
              call_id: str = "c1", record: bool = True):
    """Run start_job as the agent runs an approved call: start recorded first, result and trail appended after."""
    store.append(task_id, [
        ToolCallProposed(call_id=call_id, tool="start_job", arguments={"command": command}),
        ToolCallStarted(call_id=call_id, tool="start_job", idempotent=False),
    ])
    ctx = ToolContext(task_id=task_id, tenant="default", actor="ann", workspace=workspace, artifacts=runner.artifacts)
    began = time.monotonic()
    outcome = execute(StartJob(runner), ctx, {"command": command}, approved=True)
    elapsed = time.monotonic() - began
    if record:
        store.append(task_id, [outcome.executed(call_id), *outcome.artifact_events])
    return outcome, elapsed


def wait_finished(store: EventStore, task_id: str, timeout: float = 10) -> JobFinished:
    deadline = time.monotonic() + timeout
    while not (done := events(store, task_id, JobFinished)):
        assert time.monotonic() < deadline, "the job never finished"
        time.sleep(0.05)
    [finished] = done
    return finished


def wait_reported(store: EventStore, runner: JobRunner, task_id: str, timeout: float = 10) -> JobFinished:
    """The job's end is recorded, then notified, in two appends: wait for the job's thread to finish both."""
    finished = wait_finished(store, task_id, timeout)
    assert runner.wait(timeout), "the job's thread never finished reporting"
    return finished


def pending(store: EventStore, task_id: str) -> list[queue.Pending]:
    with store.reading() as conn:
        return queue.pending(conn, task_id)


def gone(pid: int) -> bool:
    """Dead, or a zombie nobody has reaped yet (it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


# -- starting and finishing -------------------------------------------------------------------------


def test_start_job_returns_at_once_and_its_end_reaches_the_task(store, runner, workspace, monkeypatch) -> None:
    monkeypatch.setenv("API_TOKEN", "s3cret")
    task_id = running_task(store, workspace)
    # The command cannot end before the test lets it: start_job returning at all shows it did not wait.
    command = ('while [ ! -f go ]; do sleep 0.05; done; echo built > result.txt; echo "$PWD ${API_TOKEN:-no token}"; '
               'echo careful >&2')
    outcome, _ = start_job(store, runner, task_id, workspace, command)
    assert outcome.ok
    job_id = outcome.observation["job_id"]
    assert outcome.artifact_events == (JobStarted(job_id=job_id, call_id="c1", command=command),)
    [started] = events(store, task_id, JobStarted)
    assert started.job_id == job_id
    assert runner.running() == [job_id] and not events(store, task_id, JobFinished)
    (workspace / "go").touch()

    finished = wait_reported(store, runner, task_id)
    assert (finished.job_id, finished.exit_code) == (job_id, 0)
    assert re.fullmatch(r"finished with exit code 0 after \d+(\.\d)? s", finished.summary), finished.summary
    output = runner.artifacts.get(finished.output_ref).decode()
    assert output == f"{workspace.resolve()} no token\ncareful\n"
    assert (workspace / "result.txt").read_text() == "built\n"
    [note] = pending(store, task_id)
    assert (note.source, note.kind, note.dedupe_key) == ("job", "job_finished", f"job:{job_id}")
    assert note.text.startswith(f"job {job_id} (while [ ! -f go ]; do sleep 0.05; done; echo built > re")
    assert "finished with exit code 0 after" in note.text and note.text.endswith(f"; output: {finished.output_ref}")
    assert runner.running() == [] and list((runner.jobs_dir).iterdir()) == []


def test_start_job_runs_nothing_without_approval(store, runner, workspace) -> None:
    task_id = running_task(store, workspace)
    ctx = ToolContext(task_id=task_id, tenant="default", actor="ann", workspace=workspace, artifacts=runner.artifacts)
    outcome = execute(StartJob(runner), ctx, {"command": "touch ran"}, approved=False)
    assert outcome.observation["error"] == "approval_required" and outcome.artifact_events == ()
    assert runner.running() == []


def test_a_failing_command_reports_its_exit_code(store, runner, workspace) -> None:
    task_id = running_task(store, workspace)
    outcome, _ = start_job(store, runner, task_id, workspace, "echo 'no rule to make target' >&2; exit 3")
    finished = wait_reported(store, runner, task_id)
    assert finished.exit_code == 3
    assert runner.artifacts.get(finished.output_ref) == b"no rule to make target\n"
    [note] = pending(store, task_id)
    assert "finished with exit code 3 after" in note.text


def test_the_maximum_runtime_kills_the_whole_process_group(store, tmp_path, workspace) -> None:
    runner = make_runner(store, tmp_path, max_runtime_s=1)
    task_id = running_task(store, workspace)
    began = time.monotonic()
    start_job(store, runner, task_id, workspace, "sleep 60 & echo $! > background.pid; echo waiting; sleep 60")
    finished = wait_finished(store, task_id)
    assert time.monotonic() - began < 3
    assert finished.exit_code == -9
    assert finished.summary == "was killed after reaching its maximum runtime of 1.0 s"
    assert runner.artifacts.get(finished.output_ref) == b"waiting\n"
    assert gone(int((workspace / "background.pid").read_text())), "the job's background process survived"
    runner.close()


def test_the_output_kept_is_capped_at_both_ends(store, tmp_path, workspace) -> None:
    runner = make_runner(store, tmp_path, output_cap=1000)
    task_id = running_task(store, workspace)
    start_job(store, runner, task_id, workspace, "echo first; seq 1 100000; echo last")
    output = runner.artifacts.get(wait_finished(store, task_id).output_ref).decode()
    assert output.startswith("first\n1\n") and output.endswith("99999\n100000\nlast\n")
    assert "bytes omitted ..." in output and len(output) < 1100
    runner.close()


def test_a_job_whose_start_is_never_recorded_never_runs(store, tmp_path, workspace) -> None:
    runner = make_runner(store, tmp_path, record_wait_s=0.5)
    task_id = running_task(store, workspace)
    # The call's result (and with it JobStarted) never reaches the log, as when the agent dies first.
    outcome, _ = start_job(store, runner, task_id, workspace, "touch ran.txt", record=False)
    assert outcome.ok
    assert runner.wait(timeout=3)
    assert not (workspace / "ran.txt").exists()
    assert events(store, task_id, JobStarted) == []


def test_a_job_that_ends_during_another_tool_call_is_recorded_after_it(store, runner, workspace) -> None:
    task_id = running_task(store, workspace)
    start_job(store, runner, task_id, workspace, "sleep 0.2")
    # The agent starts another call; appending to the task now would cost that call its result.
    store.append(task_id, [
        ToolCallProposed(call_id="c2", tool="shell", arguments={"command": "make"}),
        ToolCallStarted(call_id="c2", tool="shell", idempotent=False),
    ])
    time.sleep(1.0)
    assert events(store, task_id, JobFinished) == [], "JobFinished was appended while a tool call ran"
    version = store.stream_version(task_id)
    store.append(task_id, [ToolCallExecuted(call_id="c2", tool="shell", status="ok", observation={})],
                 expected_version=version)
    assert wait_finished(store, task_id, timeout=2).exit_code == 0


# -- recovery ---------------------------------------------------------------------------------------

CRASH = """
import os, signal, sys, time
from pathlib import Path
from runtime.artifacts import ArtifactStore
from runtime.harness.jobs import JobRunner
from store import EventStore
from tests.runtime.harness.test_jobs import running_task, start_job

url, tmp = sys.argv[1], Path(sys.argv[2])
store = EventStore(url)
runner = JobRunner(store, ArtifactStore(tmp / "artifacts"), tmp / "jobs")
task_id = running_task(store, tmp / "ws")
outcome, _ = start_job(store, runner, task_id, tmp / "ws", "echo partial; echo $$ > job.pid; sleep 60")
while not (tmp / "ws" / "job.pid").exists():
    time.sleep(0.02)
print(task_id, outcome.observation["job_id"], flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_recover_marks_jobs_orphaned_by_a_crash_unknown_and_notifies(store, tmp_path, workspace) -> None:
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH, store.url, str(tmp_path)], capture_output=True, text=True, timeout=60,
        cwd=REPO,
    )
    assert crashed.returncode == -9, crashed.stderr
    task_id, job_id = crashed.stdout.split()
    leftover = int((workspace / "job.pid").read_text())
    assert not gone(leftover), "the job should outlive the kill -9 of its agentd"

    runner = make_runner(store, tmp_path)
    assert runner.recover() == [job_id]
    finished = wait_finished(store, task_id, timeout=1)
    assert (finished.exit_code, finished.summary) == (None, UNKNOWN)
    assert runner.artifacts.get(finished.output_ref) == b"partial\n"
    [note] = pending(store, task_id)
    assert note.text == (
        f"job {job_id} (echo partial; echo $$ > job.pid; sleep 60): {UNKNOWN}; output: {finished.output_ref}"
    )
    # A bound on the wait, not a speed to meet: on a loaded machine the kill can take its time to land.
    deadline = time.monotonic() + 30
    while not gone(leftover):
        assert time.monotonic() < deadline, "the orphaned job's processes were not killed"
        time.sleep(0.05)
    assert not (tmp_path / "jobs").exists() or list((tmp_path / "jobs").iterdir()) == []
    # Recovering again changes nothing.
    assert runner.recover() == []
    assert len(pending(store, task_id)) == 1


def test_recover_kills_a_jobs_processes_though_agentd_died_before_writing_anything_of_them(
    store, tmp_path, workspace
) -> None:
    # Seen under load: the job's shell ran before agentd had written down its process group, agentd was
    # killed in between, and recovery, which read that note, left the job running.
    task_id = running_task(store, workspace)
    store.append(task_id, [JobStarted(job_id="j-0000cafe", call_id="c1", command="sleep 60")])
    orphan = subprocess.Popen(["sh", "-c", "sleep 60; true"], env={**os.environ, MARKER: "j-0000cafe"},
                              start_new_session=True)
    stranger = subprocess.Popen(["sh", "-c", "sleep 60; true"], start_new_session=True)
    try:
        assert make_runner(store, tmp_path).recover() == ["j-0000cafe"]
        # A bound on the wait, not a speed to meet.
        assert orphan.wait(timeout=30) == -9
        assert stranger.poll() is None, "a process without the job's marker is not the job's"
    finally:
        orphan.kill()
        stranger.kill()
        orphan.wait()
        stranger.wait()


def test_recover_enqueues_a_notification_lost_between_the_two_appends(store, tmp_path, workspace) -> None:
    task_id = running_task(store, workspace)
    finished = JobFinished(job_id="j-0000beef", exit_code=0, summary="finished with exit code 0 after 2.0 s")
    store.append(task_id, [JobStarted(job_id="j-0000beef", call_id="c1", command="make"), finished])
    assert pending(store, task_id) == []
    assert make_runner(store, tmp_path).recover() == []
    [note] = pending(store, task_id)
    assert note.text == "job j-0000beef (make) finished with exit code 0 after 2.0 s"
    assert make_runner(store, tmp_path).recover() == [] and len(pending(store, task_id)) == 1


# -- through the agent loop -------------------------------------------------------------------------


def test_the_agent_starts_a_job_and_hears_of_its_end_in_a_later_request(store, runner, workspace, tmp_path):
    profile = WORKSPACE.model_copy(update={"name": "builder", "tools": ("read_file", "start_job")})
    rt = scripted(store, tmp_path, [call("start_job", command="echo compiled"), answer("the build passed")],
                  profiles={"builder": profile})
    register_jobs(rt.tools, runner)
    task_id = submit(store, workspace, profile="builder", allowed_effects=EVERYTHING)

    def run(**kw) -> str:
        return anyio.run(lambda: run_task(rt, task_id, **kw))

    assert run() == "awaiting_approval"
    [request] = events(store, task_id, ApprovalRequested)
    store.append(task_id, [ApprovalGranted(approval_id=request.approval_id, by="ann")])
    run(max_decisions=1)
    [executed] = events(store, task_id, ToolCallExecuted)
    job_id = executed.observation["job_id"]
    [started] = events(store, task_id, JobStarted)
    assert started == JobStarted(job_id=job_id, call_id=executed.call_id, command="echo compiled")
    # The job's end and its notification are two appends: the request waits for the second.
    finished = wait_reported(store, runner, task_id)

    assert run() == "completed"
    [admitted] = events(store, task_id, NotificationsAdmitted)
    [item] = admitted.items
    assert (item.source, item.kind) == ("job", "job_finished")
    assert f"job {job_id} (echo compiled) finished with exit code 0" in rt.model.prompts[-1]
    assert finished.output_ref in rt.model.prompts[-1]


def test_register_jobs_offers_start_job(store, runner) -> None:
    tools = ToolRegistry()
    register_jobs(tools, runner)
    contract = tools.get("start_job").contract
    assert (contract.idempotent, contract.needs_approval, contract.scope) == (False, True, "workspace")
    assert [e.value for e in contract.effects] == ["external"]
    assert set(contract.output_model.model_fields) == {"job_id"}

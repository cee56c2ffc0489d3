"""Background jobs: a command a task starts and goes on without, reported back to the task when it ends."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection

from notifications import queue
from runtime import logs
from runtime.agent.view import Calls
from runtime.artifacts import ArtifactStore
from runtime.tools import Tool, ToolContext, ToolRegistry
from runtime.tools.shell import POLL_S, SHELL, clean_environment, exited, kill_group, process_contract
from store import EventStore
from store.errors import ConcurrencyConflict, StoreError
from store.events import JobFinished, JobStarted
from store.log import iter_records
from store.queries.jobs import finished_jobs, job_recorded, unfinished_jobs
from store.queries.notifications import dedupe_keys
from store.queries.tasks import standing

log = logs.get_logger("agentd.jobs")

TOOL_NAME = "start_job"
MAX_RUNTIME_S = 3600.0
# Bytes of output kept in the artifact, half from the start and half from the end, as the shell tool keeps them.
OUTPUT_CAP = 256 * 1024
# How long a started job waits for its JobStarted to be committed before it is dropped without running.
RECORD_WAIT_S = 60.0
# How long a finished job waits for the task's running tool call to end before recording anyway;
# longer than any tool's timeout.
BUSY_WAIT_S = 600.0
UNKNOWN = "agentd stopped while the job ran; its outcome is unknown"
# Set in each job's environment, so that recovery can tell the job's leftover processes from others.
MARKER = "AGENTD_JOB_ID"
COMMAND_CHARS = 60

# -- the tool --------------------------------------------------------------------------------------


class StartJobArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, max_length=10_000, description="one /bin/sh command line, run in the workspace")


class StartJobOutput(BaseModel):
    job_id: str = Field(
        pattern=r"^j-[0-9a-f]{8}$", description="names the job in the notification that reports its end"
    )


class StartJob(Tool[StartJobArgs, StartJobOutput]):
    """Hands the command to the process's JobRunner and returns the job's id at once.

    `JobStarted` goes into the call's trail, so the agent appends it with the call's
    `ToolCallExecuted`, in one atomic append: the runner never writes to the task's stream while
    the call is in flight (the agent appends the result with the version it saw before the call, and
    a write in between would cost it that result). The call id comes from the log: the agent records
    `ToolCallStarted` just before it runs a tool, so the task's open `start_job` call is this one.
    """

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner
        self.contract = process_contract(
            name=TOOL_NAME,
            description=(
                "Start a long-running command (a build, a test suite) with /bin/sh in the workspace and return "
                "its job_id at once, without waiting for it. When it ends you get a notification with its exit "
                "code and output. Use shell instead for a quick command whose result you need now. Needs a "
                "person's approval; never retried. It is killed after "
                f"{runner.max_runtime_s:g}s, and processes it leaves behind are killed when it ends."
            ),
            input_model=StartJobArgs,
            output_model=StartJobOutput,
            timeout_s=10,
            preconditions=("the command needs no input on stdin", "secrets are not in its environment"),
            summary_fields=("job_id",),
        )

    def run(self, ctx: ToolContext, args: StartJobArgs) -> StartJobOutput:
        job = self.runner.start(ctx.task_id, ctx.workspace, args.command)
        ctx.record(JobStarted(job_id=job.job_id, call_id=job.call_id, command=job.command))
        return StartJobOutput(job_id=job.job_id)


def register_jobs(tools: ToolRegistry, runner: JobRunner) -> None:
    """Offer `start_job` backed by `runner`; a profile still has to list it, and a task to allow external effects."""
    tools.register(StartJob(runner))


# -- the runner --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    job_id: str
    task_id: str
    call_id: str
    command: str
    workspace: Path


class JobRunner:
    """Runs background jobs in their own process groups and records how each ended.

    A job's process starts only once its `JobStarted` is in the log, so a job never runs unrecorded,
    and if the call's result never reaches the log (a crash, a lost race) the command never runs.
    When it ends, its output goes to the artifact store, `JobFinished` is appended to the task's
    stream at a moment when none of the task's tool calls runs, and a notification tells the task.

    Each job gets a thread that waits for its `JobStarted`, runs the command (clean environment, stdin
    closed, stdout and stderr to a file under `jobs_dir`), kills its process group when it ends or
    passes `max_runtime_s`, and records the result. One runner per process; call `recover` at start.
    """

    def __init__(
        self,
        store: EventStore,
        artifacts: ArtifactStore,
        jobs_dir: Path,
        *,
        max_runtime_s: float = MAX_RUNTIME_S,
        output_cap: int = OUTPUT_CAP,
        record_wait_s: float = RECORD_WAIT_S,
        busy_wait_s: float = BUSY_WAIT_S,
    ) -> None:
        self.store = store
        self.artifacts = artifacts
        self.jobs_dir = Path(jobs_dir)
        self.max_runtime_s = max_runtime_s
        self.output_cap = output_cap
        self.record_wait_s = record_wait_s
        self.busy_wait_s = busy_wait_s
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def start(self, task_id: str, workspace: Path, command: str, *, call_id: str | None = None) -> Job:
        """Take a job and return at once; it runs once its JobStarted (which the caller records) is in the log."""
        if self._stopping.is_set():
            raise StoreError("agentd is stopping; no new jobs start")
        if call_id is None:
            call_id = self._running_call(task_id)
        job = Job(f"j-{secrets.token_hex(4)}", task_id, call_id, command, Path(workspace))
        thread = threading.Thread(target=self._run, args=(job,), name=f"job:{job.job_id}", daemon=True)
        with self._lock:
            self._threads[job.job_id] = thread
        thread.start()
        return job

    def _running_call(self, task_id: str) -> str:
        """The task's `start_job` call in flight, from the log; empty when called outside a task's loop."""
        with self.store.reading() as conn:
            calls = [call_id for call_id, tool in _open_calls(conn, task_id).items() if tool == TOOL_NAME]
        return calls[-1] if calls else ""

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._threads)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for every job this runner took to be recorded as finished (or dropped); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not self.running()

    def close(self, timeout: float = 10.0) -> None:
        """Kill the running jobs' process groups and record how they ended; jobs not yet started never start."""
        self._stopping.set()
        self.wait(timeout)

    # -- one job -----------------------------------------------------------------------------------

    def _run(self, job: Job) -> None:
        try:
            with logs.bound(task_id=job.task_id, job_id=job.job_id):
                if not self._wait_until_recorded(job.job_id):
                    log.warning("job dropped before it started: its JobStarted was never recorded")
                    return
                if self._stopping.is_set():
                    finished = JobFinished(
                        job_id=job.job_id, exit_code=None, summary="never started: agentd stopped first"
                    )
                else:
                    finished = self._execute(job)
                self._finish(job.task_id, job.command, finished)
                log.info("job finished", exit_code=finished.exit_code, summary=finished.summary)
        except Exception:  # noqa: BLE001  a job thread must not die silently; recovery settles the record
            log.exception("job runner failed")
        finally:
            with self._lock:
                self._threads.pop(job.job_id, None)

    def _wait_until_recorded(self, job_id: str) -> bool:
        deadline = time.monotonic() + self.record_wait_s
        while True:
            with self.store.reading() as conn:
                if job_recorded(conn, job_id):
                    return True
            if self._stopping.is_set() or time.monotonic() >= deadline:
                return False
            self._stopping.wait(POLL_S)

    def _execute(self, job: Job) -> JobFinished:
        folder = self.jobs_dir / job.job_id
        folder.mkdir(parents=True, exist_ok=True)
        output = folder / "output"
        env = clean_environment(os.environ)
        env["PWD"] = str(job.workspace)
        env[MARKER] = job.job_id
        started = time.monotonic()
        try:
            with open(output, "wb") as out:
                proc = subprocess.Popen(
                    [SHELL, "-c", job.command],
                    cwd=job.workspace,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    # Its own process group, so one signal reaches everything the command started.
                    start_new_session=True,
                )
        except OSError as e:
            return JobFinished(job_id=job.job_id, exit_code=None, summary=f"could not start: {e.strerror or e}")
        deadline = started + self.max_runtime_s
        ended = False
        try:
            while not (ended := exited(proc.pid)):
                if self._stopping.is_set() or time.monotonic() >= deadline:
                    break
                self._stopping.wait(POLL_S)
        finally:
            # Before reaping: while the leader is a zombie its pid, and so the group id, cannot be reused.
            kill_group(proc.pid)
            proc.wait()
        elapsed = time.monotonic() - started
        if ended:
            summary = f"finished with exit code {proc.returncode} after {_duration(elapsed)}"
        elif self._stopping.is_set():
            summary = f"was killed when agentd stopped, after {_duration(elapsed)}"
        else:
            summary = f"was killed after reaching its maximum runtime of {_duration(self.max_runtime_s)}"
        ref = self.artifacts.put(capped(output, self.output_cap))
        return JobFinished(job_id=job.job_id, exit_code=proc.returncode, output_ref=ref, summary=summary)

    def _finish(self, task_id: str, command: str, finished: JobFinished, *, wait_for_quiet: bool = True) -> None:
        self._record(task_id, finished, wait_for_quiet=wait_for_quiet)
        self._notify(task_id, command, finished)
        shutil.rmtree(self.jobs_dir / finished.job_id, ignore_errors=True)

    def _record(self, task_id: str, finished: JobFinished, *, wait_for_quiet: bool = True) -> None:
        """Append JobFinished when no tool call of the task is running, with the version that showed it.

        A tool call in flight will be recorded with the version the agent saw before it; appending in
        between would make that append fail and turn the call's result into an unknown outcome.
        """
        give_up = time.monotonic() + (self.busy_wait_s if wait_for_quiet else 0.0)
        while True:
            with self.store.reading() as conn:
                version, busy = _activity(conn, task_id)
            if busy and time.monotonic() < give_up and not self._stopping.is_set():
                time.sleep(POLL_S)
                continue
            try:
                self.store.append(task_id, [finished], expected_version=version, actor="agentd")
                return
            except ConcurrencyConflict:
                continue

    def _notify(self, task_id: str, command: str, finished: JobFinished) -> None:
        queue.enqueue(self.store, job_notification(task_id, command, finished))

    # -- recovery ----------------------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Settle jobs a stopped agentd left behind; returns the ids of jobs marked as unknown.

        A job recorded as started and never as finished ran in a process that died with agentd (any
        of its processes still running are killed here): it gets `JobFinished(exit_code=None)` with
        whatever output it wrote, and a notification. A finished job whose notification was lost
        to a crash between the two appends gets it now. Call before this runner takes any job.
        """
        with self.store.reading() as conn:
            orphans = unfinished_jobs(conn)
        marked = []
        for job_id, task_id, command in orphans:
            if job_id in self.running():
                continue
            folder = self.jobs_dir / job_id
            _kill_leftovers(job_id)
            output = folder / "output"
            ref = self.artifacts.put(capped(output, self.output_cap)) if output.is_file() else None
            finished = JobFinished(job_id=job_id, exit_code=None, output_ref=ref, summary=UNKNOWN)
            # Nothing runs yet at a start: a call left open is a crash's, not a call in flight.
            self._finish(task_id, command, finished, wait_for_quiet=False)
            log.warning("job outcome unknown after a stop", task_id=task_id, job_id=job_id)
            marked.append(job_id)
        self._notify_lost()
        self._sweep()
        return marked

    def _notify_lost(self) -> None:
        with self.store.reading() as conn:
            told = dedupe_keys(conn, "job")
            lost = [
                (job.task_id, job.command, _event_at(conn, job.finished_seq))
                for job in finished_jobs(conn)
                if dedupe_key(job.job_id) not in told
            ]
        for task_id, command, event in lost:
            log.info("enqueueing a job notification lost to a stop", task_id=task_id, job_id=event.job_id)
            self._notify(task_id, command, event)

    def _sweep(self) -> None:
        """Folders of jobs that are no longer running here: their output is stored or was never recorded."""
        if not self.jobs_dir.is_dir():
            return
        running = set(self.running())
        for folder in self.jobs_dir.iterdir():
            if folder.name not in running:
                shutil.rmtree(folder, ignore_errors=True)


# -- helpers ----------------------------------------------------------------------------------------


def dedupe_key(job_id: str) -> str:
    return f"job:{job_id}"


def job_notification(task_id: str, command: str, finished: JobFinished):
    short = command if len(command) <= COMMAND_CHARS else command[: COMMAND_CHARS - 3] + "..."
    # The unknown outcome is a sentence about agentd, not about the job.
    joint = ": " if finished.summary == UNKNOWN else " "
    text = f"job {finished.job_id} ({short}){joint}{finished.summary}"
    if finished.output_ref:
        text += f"; output: {finished.output_ref}"
    return queue.new_notification(
        source="job",
        kind="job_finished",
        tasks=[task_id],
        text=text,
        payload={"job_id": finished.job_id, "exit_code": finished.exit_code, "output_ref": finished.output_ref},
        dedupe_key=dedupe_key(finished.job_id),
    )


def capped(path: Path, cap: int) -> bytes:
    """The file's first and last `cap / 2` bytes, with a note of how many were left out between."""
    half = max(1, cap // 2)
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size <= 2 * half:
            return f.read()
        head = f.read(half)
        f.seek(size - half)
        tail = f.read(half)
    return head + f"\n[... {size - 2 * half} bytes omitted ...]\n".encode() + tail


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def _activity(conn: Connection, task_id: str) -> tuple[int, bool]:
    """The task's stream version, and whether one of its tool calls is running now."""
    found = standing(conn, task_id)
    if found is None:
        raise StoreError(f"no task {task_id!r} for a job to report to")
    # Waiting for a person or finished: a call left open by a crash is not running.
    return found.version, found.phase == "running" and bool(_open_calls(conn, task_id))


def _open_calls(conn: Connection, task_id: str) -> dict[str, str]:
    """Tool calls of the task that started and have no result yet: call id -> tool, as the loop sees them."""
    calls = Calls()
    for i, rec in enumerate(iter_records(conn, stream_id=task_id, types=("ToolCallStarted", "ToolCallExecuted"))):
        calls.apply(rec.event, i)
    return calls.open()


def _event_at(conn: Connection, seq: int):
    [rec] = iter_records(conn, after=seq - 1, until=seq)
    return rec.event


def _kill_leftovers(job_id: str) -> None:
    """Kill every process group that holds a process carrying the job's marker.

    Found by the marker in each process's environment, not by a pid agentd wrote down: agentd may die
    between starting the job and writing anything, and after a reboot a written pid may be another's.
    """
    for pgid in _job_groups(job_id):
        log.warning("killing processes a stopped agentd left running", job_id=job_id, pgid=pgid)
        kill_group(pgid)


def _job_groups(job_id: str) -> set[int]:
    """The process groups of the processes whose environment carries the job's marker."""
    marker = f"{MARKER}={job_id}".encode()
    proc = Path("/proc")
    groups: set[int] = set()
    if not proc.is_dir():
        return groups
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            stat = (entry / "stat").read_text()
            # Fields after the command name, which may itself hold spaces and parentheses.
            groups.add(int(stat[stat.rindex(")") + 2 :].split()[2]))
        except (OSError, ValueError, IndexError):
            continue
    return groups

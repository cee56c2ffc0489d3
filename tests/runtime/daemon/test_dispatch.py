"""The daemon's scheduler: a task waiting for a person runs again once something new is recorded for it.
Replies are scripted; the store, the approvals and the scheduler's polling are the real ones."""

from __future__ import annotations

import time

import anyio

from runtime.agent.loop import Stopped
from runtime.daemon import dispatch
from runtime.daemon.dispatch import Scheduler
from runtime.harness import approvals
from runtime.inference.scripted import ScriptedModel
from store.events import TaskPhase, ToolCallExecuted
from tests.helpers import EVERYTHING, answer, call, events, make_runtime, submit

# Long enough for a loaded machine to take two scripted decisions; a task left waiting never gets there.
GIVE_UP_S = 30


def phase(store, task_id: str) -> str:
    return store.task(task_id).summary.phase


def serve(scheduler: Scheduler, until, linger_s: float = 0.0) -> None:
    """Run the scheduler as the daemon does until `until()` holds (or GIVE_UP_S), then `linger_s` more."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(scheduler.run)
            with anyio.move_on_after(GIVE_UP_S):
                while not until():
                    await anyio.sleep(0.05)
            await anyio.sleep(linger_s)
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_a_denial_recorded_just_as_the_runner_stops_still_resumes_the_task(
    store, workspace, tmp_path, monkeypatch
) -> None:
    rt = make_runtime(store, ScriptedModel([call("shell", command="echo hi"), answer("I was not allowed")]), tmp_path)
    task_id = submit(store, workspace, allowed_effects=EVERYTHING)
    real = dispatch.run_until_stopped

    async def decided_as_it_stops(rt, task_id: str) -> Stopped:
        # A person denies from another process after the runner's last read, before the scheduler
        # notes where the task stopped: the widest form of the race, made certain.
        stopped = await real(rt, task_id)
        for _, pending in store.approvals():
            approvals.decide(store, pending.approval_id, grant=False, by="ann", reason="too risky")
        return stopped

    monkeypatch.setattr(dispatch, "run_until_stopped", decided_as_it_stops)
    serve(Scheduler(rt, poll_seconds=0.05), until=lambda: TaskPhase(phase(store, task_id)).finished)
    assert phase(store, task_id) == "completed"
    [result] = events(store, task_id, ToolCallExecuted)
    assert result.status == "denied" and "too risky" in result.observation["message"]


def test_a_waiting_task_with_nothing_new_is_not_run_again(store, workspace, tmp_path) -> None:
    rt = make_runtime(store, ScriptedModel([call("shell", command="echo hi")]), tmp_path)
    task_id = submit(store, workspace, allowed_effects=EVERYTHING)
    scheduler = Scheduler(rt, poll_seconds=0.05)
    serve(scheduler, until=lambda: phase(store, task_id) == TaskPhase.AWAITING_APPROVAL, linger_s=0.5)  # ten polls
    assert scheduler._runnable() == []
    assert len(rt.model.prompts) == 1, "parked: no further model call while nobody decides"




def test_on_postgresql_a_task_submitted_by_another_process_runs_before_the_next_poll(
    pg_url, workspace, tmp_path
) -> None:
    from store import EventStore

    with EventStore(pg_url) as store, EventStore(pg_url) as other:
        rt = make_runtime(store, ScriptedModel([answer("All quiet.")]), tmp_path)
        # A poll far longer than the test may take: only the commit's NOTIFY can start the task.
        scheduler = Scheduler(rt, poll_seconds=3600)
        submitted: list[str] = []
        start = time.monotonic()

        def until() -> bool:
            if not submitted:
                if time.monotonic() - start < 1.0:
                    return False  # the scheduler's first look, at its start, finds nothing
                submitted.append(submit(other, workspace))
            return TaskPhase(phase(store, submitted[0])).finished

        serve(scheduler, until=until)
        assert phase(store, submitted[0]) == "completed"

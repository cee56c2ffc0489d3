"""A task run in the foreground by `agentd task run`, and what Ctrl-C does to it.

The first Ctrl-C cancels the run: the decision in flight is abandoned at its next await, and its model
call is told to stop. An HTTP call stops at once; llama.cpp stops only after the batch of the prompt it
is evaluating, which takes seconds, so the user is told what the wait is for and that a second Ctrl-C
ends the process at once. Either way the task's log says the run was interrupted, and the next run
takes the decision again.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Callable

import anyio

from runtime.agent.loop import run_task
from runtime.errors import LeaseLost
from store.events import RunInterrupted, TaskPhase

if TYPE_CHECKING:
    from runtime.agent.loop import Runtime
    from runtime.cli._watch import Watch

WAITING = "waiting for the model call to finish (Ctrl-C again to stop now)"
INTERRUPTED_EXIT = 130
# How soon a run stops once its lease is found lost (the finding itself waits for a renewal).
LOST_POLL_S = 0.25


def run_in_foreground(
    runtime: Runtime, task_id: str, max_decisions: int | None, watch: Watch, lost: threading.Event | None = None
) -> str | None:
    """The task's phase when the run stops, or None when Ctrl-C stopped it first. `lost` is set when the
    task's lease is lost: the run stops and LeaseLost says who runs the task now."""

    def stop_now() -> None:
        # The second Ctrl-C: the model call may go on in its thread for a while yet, and the interpreter
        # would wait for that thread at exit, so the process ends without it once the log has its line.
        _close(runtime, watch)
        _record(runtime, task_id)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(INTERRUPTED_EXIT)

    lost = lost if lost is not None else threading.Event()
    try:
        phase = anyio.run(_run, runtime, task_id, max_decisions, watch, stop_now, lost)
    finally:
        _close(runtime, watch)
    if lost.is_set():
        # The log is the other worker's to write now: nothing is recorded from here.
        held = {lease.task_id: lease.worker_id for lease in runtime.store.workers.snapshot()[2]}
        raise LeaseLost(
            f"{task_id} was taken over by worker {held.get(task_id, 'another worker')} after this run's lease "
            f"ran out: follow it with `agentd task show {task_id}`"
        )
    if phase is None:
        _record(runtime, task_id)
    return phase


async def _run(
    runtime: Runtime, task_id: str, max_decisions: int | None, watch: Watch, stop_now: Callable[[], None],
    lost: threading.Event,
) -> str | None:
    run_scope = anyio.CancelScope()

    async def on_lost() -> None:
        while not lost.is_set():
            await anyio.sleep(LOST_POLL_S)
        run_scope.cancel()

    async def on_ctrl_c() -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if run_scope.cancel_called:
                    stop_now()
                run_scope.cancel()
                model = runtime.model
                if getattr(model, "calling", False) and not getattr(model, "stops_at_once", False):
                    watch.note(WAITING)

    phase: str | None = None
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(on_ctrl_c)
        tg.start_soon(on_lost)
        try:
            with run_scope:
                phase = await run_task(runtime, task_id, max_decisions=max_decisions)
            # A call abandoned by Ctrl-C may run on past the grace the loop gives it: waited for here,
            # where a second Ctrl-C still ends the wait.
            while getattr(runtime.model, "calling", False):
                await anyio.sleep(0.05)
        except Exception as e:  # noqa: BLE001  raised below as it is, not in the task group's exception group
            failure = e
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return phase


def _close(runtime: Runtime, watch: Watch) -> None:
    watch.close()
    # Background jobs live as long as this process; the daemon is where they can outlive a turn.
    if runtime.jobs is not None:
        runtime.jobs.close()
    if runtime.mcp is not None:
        runtime.mcp.close()


def _record(runtime: Runtime, task_id: str) -> None:
    state = runtime.store.task(task_id)
    if state is not None and not TaskPhase(state.summary.phase).finished:
        runtime.store.append(task_id, [RunInterrupted(reason="agentd task run stopped by Ctrl-C")], actor="cli")

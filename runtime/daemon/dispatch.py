"""Which tasks run when: every task that can take a decision gets a runner, one at a time per task.

Runnable means submitted or running, or waiting for approval when something new has been recorded
for it since it last stopped (a decision, say). Tasks share the one model; its limiter serializes
their calls while each task's KV state waits in the model's LRU.
"""

from __future__ import annotations

import anyio
from anyio import to_thread

from runtime import logs
from runtime.harness import delegation
from runtime.agent.loop import Runtime, run_task
from runtime.agent.progress import Board
from store.errors import AgentdError
from store.events import RunInterrupted, TaskPhase

log = logs.get_logger("agentd.scheduler")

POLL_SECONDS = 0.5


class Scheduler:
    def __init__(self, rt: Runtime, poll_seconds: float = POLL_SECONDS, board: Board | None = None) -> None:
        self.rt = rt
        self.poll_seconds = poll_seconds
        self.board = board  # what each task is doing now; a task that stops leaves it
        self.running: set[str] = set()
        # The version each parked task had when its runner stopped; it runs again once that changes.
        self._parked: dict[str, int] = {}
        self._wake: anyio.Event | None = None

    async def run(self) -> None:
        self._wake = anyio.Event()
        async with anyio.create_task_group() as tg:
            while True:
                for task_id in await to_thread.run_sync(self._runnable):
                    self.running.add(task_id)
                    tg.start_soon(self._drive, task_id)
                with anyio.move_on_after(self.poll_seconds):
                    await self._wake.wait()
                self._wake = anyio.Event()

    def wake(self) -> None:
        """Look for runnable tasks now rather than at the next poll: a decision made in this process
        (on the page) resumes its task at once. Call from the event loop's thread."""
        if self._wake is not None:
            self._wake.set()

    def _record_interruption(self, task_id: str) -> None:
        summary = self.rt.store.task(task_id)
        if summary is not None and not TaskPhase(summary.summary.phase).finished:
            self.rt.store.append(task_id, [RunInterrupted(reason="agentd stopped")])
            log.info("task interrupted", task_id=task_id, version=summary.summary.version)

    def _runnable(self) -> list[str]:
        ready = []
        for s in self.rt.store.tasks():
            if s.task_id in self.running or TaskPhase(s.phase).finished or s.phase == TaskPhase.WAITING_FOR_USER:
                continue
            if delegation.is_sub_task(s.task_id):
                continue  # run by its parent's delegate call, which resumes it after a restart too
            if s.phase == TaskPhase.AWAITING_APPROVAL and self._parked.get(s.task_id) == s.version:
                continue
            ready.append(s.task_id)
        return ready

    async def _drive(self, task_id: str) -> None:
        try:
            with logs.bound(task_id=task_id):
                phase = await run_task(self.rt, task_id)
                log.info("task stopped", phase=phase)
        except anyio.get_cancelled_exc_class():
            # agentd is stopping: say so in the task's log, then let the cancellation go on. The
            # decision in flight is taken again from the log at the next start.
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(self._record_interruption, task_id)
            raise
        except AgentdError as e:
            # A conflict means someone else moved the task (a cancel, another worker): look again later.
            log.warning("task runner stopped", error=str(e))
        finally:
            self._parked[task_id] = self.rt.store.stream_version(task_id)
            self.running.discard(task_id)
            if self.board is not None:
                self.board.clear(task_id)

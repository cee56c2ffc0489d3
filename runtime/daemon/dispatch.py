"""Which tasks run when: every task that can take a decision gets a runner, one at a time per task.

Runnable means submitted or running, or waiting for approval when something new has been recorded
for it since it last stopped (a decision, say). Tasks share the one model; its limiter serializes
their calls while each task's KV state waits in the model's LRU.

Where several agentd serve one database, each is a worker: it runs a task only while it holds the task's
lease (store/workers.py), renews its leases with a heartbeat, and gives a task back when its runner
stops. A task whose lease another worker took (this process stalled past it) has its runner stopped here.

A runner that fails (a full or read-only disk, a store error) interrupts its task, not the daemon:
the reason is recorded as RunInterrupted as soon as the store can take it (on a full disk, once space
allows), and the task is tried again after a pause that doubles with each failure in a row.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import anyio
from anyio import to_thread

from runtime import disk, logs
from runtime.agent.loop import Runtime, run_until_stopped
from runtime.agent.progress import Board
from runtime.daemon.membership import Membership
from runtime.harness import delegation
from store.errors import AgentdError, ConcurrencyConflict
from store.events import RunInterrupted, TaskPhase
from store.wakeup import LogWakeups

log = logs.get_logger("agentd.scheduler")

POLL_SECONDS = 0.5
# On PostgreSQL: how long a listener's thread waits for a wake-up before it checks it is still wanted,
# and the least time between two looks it causes (every append of every worker announces itself).
WAKE_WAIT_S = 1.0
WAKE_GAP_S = 0.05
WAKE_RETRY_S = 5.0
# A task whose runner failed waits this long before it runs again, twice as long after each further
# failure in a row, up to the cap: each attempt may cost a model call.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 300.0


@dataclasses.dataclass
class _Held:
    """A task whose runner failed: why, whether that is in its log yet, and when it may run again."""

    reason: str
    pause_s: float
    recorded: bool = False
    retry_at: float = 0.0


class Scheduler:
    def __init__(
        self, rt: Runtime, poll_seconds: float = POLL_SECONDS, board: Board | None = None,
        data_dir: Path | None = None, member: Membership | None = None,
    ) -> None:
        self.rt = rt
        self.member = member  # None: the only runner of its database, which needs no leases
        self.poll_seconds = poll_seconds
        self.board = board  # what each task is doing now; a task that stops leaves it
        self.data_dir = data_dir  # asked whether it is full or read-only when a store write fails
        self.running: set[str] = set()
        # The stream version each parked task's runner last read; it runs again once that changes.
        self._parked: dict[str, int] = {}
        self._held: dict[str, _Held] = {}
        self._failures: dict[str, int] = {}  # failures in a row, per task
        self._wake: anyio.Event | None = None
        self._scopes: dict[str, anyio.CancelScope] = {}
        self._lost: set[str] = set()  # runners stopped because another worker took their task

    async def run(self) -> None:
        self._wake = anyio.Event()
        async with anyio.create_task_group() as tg:
            if self.member is not None:
                tg.start_soon(self._beat, self.member)
            if not self.rt.store.engines.is_sqlite:
                tg.start_soon(self._listen)
            while True:
                if any(not held.recorded for held in self._held.values()):
                    await to_thread.run_sync(self._record_held)
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

    def _release(self, task_id: str) -> None:
        assert self.member is not None
        try:
            self.rt.store.workers.release(self.member.worker_id, [task_id])
        except (AgentdError, OSError) as e:
            log.error("lease not given back; it runs out instead", task_id=task_id, error=str(e))

    def _record_interruption(self, task_id: str, reason: str = "agentd stopped") -> None:
        summary = self.rt.store.task(task_id)
        if summary is not None and not TaskPhase(summary.summary.phase).finished:
            self.rt.store.append(task_id, [RunInterrupted(reason=reason)])
            log.info("task interrupted", task_id=task_id, version=summary.summary.version, reason=reason)

    def _record_held(self) -> None:
        for task_id, held in list(self._held.items()):  # a runner on the event loop may add to it
            if held.recorded:
                continue
            try:
                self._record_interruption(task_id, held.reason)
            except (AgentdError, OSError):
                continue  # the store cannot take it yet (the disk is still full): the next poll tries again
            held.recorded = True
            held.retry_at = time.monotonic() + held.pause_s

    def _hold(self, task_id: str, e: AgentdError | OSError) -> None:
        refused = disk.describe(e, self.data_dir)
        if refused is None and not isinstance(e, AgentdError):
            raise e  # an OSError the host did not cause is agentd's own bug
        reason = refused or str(e)
        failures = self._failures[task_id] = self._failures.get(task_id, 0) + 1
        pause = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (failures - 1))
        log.error("task runner failed", reason=reason, retry_in_s=pause)
        self._held[task_id] = _Held(reason=reason, pause_s=pause)

    async def _listen(self) -> None:
        """Look for runnable tasks as soon as any process commits to the log (a task submitted, a
        decision on another worker's page), not at the next poll. A burst of commits is one look."""
        while True:
            try:
                with await to_thread.run_sync(LogWakeups, self.rt.store.url) as wakeups:
                    while True:
                        if await to_thread.run_sync(wakeups.wait, WAKE_WAIT_S, abandon_on_cancel=True):
                            self.wake()
                            await anyio.sleep(WAKE_GAP_S)
            except AgentdError as e:
                # The server restarted or is out of reach: the poll goes on meanwhile; listen again later.
                log.warning("not listening for commits; polling only", error=str(e), retry_in_s=WAKE_RETRY_S)
                await anyio.sleep(WAKE_RETRY_S)

    async def _beat(self, member: Membership) -> None:
        """Renew this worker's leases; stop the runner of any task it no longer holds."""
        while True:
            await anyio.sleep(member.heartbeat_s)
            try:
                held = await to_thread.run_sync(self.rt.store.workers.heartbeat, member.worker_id, member.lease_s)
            except (AgentdError, OSError) as e:
                # The database is out of reach: the leases run out unrenewed, and whoever takes a task
                # over is stopped by the stream's version at its first append, or this runner by its own.
                log.error("heartbeat failed", error=str(e))
                continue
            for task_id in self.running - held:
                scope = self._scopes.get(task_id)
                if scope is not None and not scope.cancel_called:
                    log.warning("lease lost: another worker runs the task now", task_id=task_id)
                    self._lost.add(task_id)
                    scope.cancel()

    def _claimed(self, ready: list[str], workspaces: dict[str, str]) -> list[str]:
        """Of the runnable tasks, those this worker sees and could take the lease of."""
        member = self.member
        if member is None:
            return ready
        table = self.rt.store.workers
        elsewhere = table.held_elsewhere(member.worker_id)
        return [
            task_id for task_id in ready
            if task_id not in elsewhere and member.sees(workspaces[task_id])
            and table.claim(task_id, member.worker_id, member.lease_s)
        ]

    def _runnable(self) -> list[str]:
        ready = []
        workspaces = {}
        now = time.monotonic()
        for s in self.rt.store.tasks():
            if s.task_id in self.running or TaskPhase(s.phase).finished or s.phase == TaskPhase.WAITING_FOR_USER:
                continue
            held = self._held.get(s.task_id)
            if held is not None:
                if not held.recorded or now < held.retry_at:
                    continue
                del self._held[s.task_id]
            if delegation.is_sub_task(s.task_id):
                continue  # run by its parent's delegate call, which resumes it after a restart too
            if s.phase == TaskPhase.AWAITING_APPROVAL and self._parked.get(s.task_id) == s.version:
                continue
            ready.append(s.task_id)
            workspaces[s.task_id] = s.workspace
        return self._claimed(ready, workspaces)

    async def _drive(self, task_id: str) -> None:
        stopped = None
        try:
            with logs.bound(task_id=task_id), anyio.CancelScope() as scope:
                self._scopes[task_id] = scope
                stopped = await run_until_stopped(self.rt, task_id)
                log.info("task stopped", phase=stopped.phase)
                self._failures.pop(task_id, None)
        except anyio.get_cancelled_exc_class():
            # agentd is stopping: say so in the task's log, then let the cancellation go on. The
            # decision in flight is taken again from the log at the next start.
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(self._record_interruption, task_id)
            raise
        except ConcurrencyConflict as e:
            # Someone else moved the task (a cancel, another worker): look again at the next poll.
            log.warning("task runner stopped", error=str(e))
        except (AgentdError, OSError) as e:
            with logs.bound(task_id=task_id):
                self._hold(task_id, e)
        finally:
            self._scopes.pop(task_id, None)
            if task_id in self._lost:
                self._lost.discard(task_id)
            elif self.member is not None:
                # Given back whether it stopped or failed: a held task waits for its retry time, and
                # any worker may take it then. Shielded: a stopping agentd still hands its tasks back.
                with anyio.CancelScope(shield=True):
                    await to_thread.run_sync(self._release, task_id)
            if stopped is not None:
                self._parked[task_id] = stopped.version
            else:
                # Stopped by a failure, at a version nobody read: the next runner looks, and parks it.
                self._parked.pop(task_id, None)
            self.running.discard(task_id)
            if self.board is not None:
                self.board.clear(task_id)

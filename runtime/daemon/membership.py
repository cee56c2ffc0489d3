"""This process as one worker of its database: how it is named, how long its leases last, what it sees."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import logs
from runtime.errors import InstanceLocked
from store.errors import AgentdError

if TYPE_CHECKING:
    from store import EventStore

log = logs.get_logger("agentd.membership")


def new_worker_id() -> str:
    """Unique across hosts and restarts: the host and pid say where it runs, the suffix tells a restarted
    process that was given the same pid from the one before it."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclasses.dataclass(frozen=True)
class Membership:
    """This process as one worker of the database: its id, how long a lease lasts without renewal (after a
    kill -9 or a lost host, its tasks wait this long before another worker resumes them), and the
    workspace roots it sees (none: every workspace). A task's files must be on the worker's disk."""

    worker_id: str
    lease_s: float
    workspaces: tuple[Path, ...] = ()

    @property
    def heartbeat_s(self) -> float:
        # Three heartbeats per lease: one lost or late beat does not cost a lease.
        return self.lease_s / 3

    def sees(self, workspace: str) -> bool:
        if not self.workspaces:
            return True
        path = Path(workspace)
        return any(path == root or root in path.parents for root in self.workspaces)


@contextlib.contextmanager
def foreground_lease(store: EventStore, task_id: str, lease_s: float) -> Iterator[threading.Event]:
    """Hold `task_id`'s lease while `agentd task run` runs it here, as a worker of its own; the event
    yielded is set once the lease is lost, and the run must then stop.

    On a database that other hosts serve, the data folder's run lock guards nothing there: without the
    lease a worker elsewhere would take the same task and both would decide for it. A SQLite file is
    served from one data folder, whose run lock is enough. The lease is renewed three times per
    `lease_s` and given back at the end; a process killed meanwhile leaves it to run out, and a worker
    then resumes the task from its log. A process that stalls past its lease finds at its next renewal
    that a worker took the task over, as a serving worker does.
    """
    lost = threading.Event()
    if store.engines.is_sqlite:
        yield lost
        return
    member = Membership(new_worker_id(), lease_s)
    table = store.workers
    # Claimed first: a run refused leaves no worker behind in `agentd workers --all`.
    if not table.claim(task_id, member.worker_id, lease_s):
        held = {lease.task_id: lease.worker_id for lease in table.snapshot()[2]}
        raise InstanceLocked(
            f"{task_id} is being run by worker {held.get(task_id, 'another worker')}: "
            f"follow it with `agentd task show {task_id}`"
        )
    try:
        table.register(member.worker_id, socket.gethostname(), os.getpid(), address="agentd task run")
    except AgentdError:
        table.release(member.worker_id, [task_id])
        raise
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(member.heartbeat_s):
            try:
                held = table.heartbeat(member.worker_id, lease_s)
            except AgentdError as e:
                # The run's own appends go to the same database and fail for the same reason.
                log.warning("lease not renewed", task_id=task_id, error=str(e))
                continue
            if task_id not in held:
                log.warning("lease lost: another worker runs the task now", task_id=task_id)
                lost.set()
                return

    renewer = threading.Thread(target=renew, name="lease-renewal", daemon=True)
    renewer.start()
    try:
        yield lost
    finally:
        stop.set()
        renewer.join()
        table.stop(member.worker_id)

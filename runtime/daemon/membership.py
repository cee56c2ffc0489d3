"""This process as one worker of its database: how it is named, how long its leases last, what it sees."""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
from pathlib import Path


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

"""One agentd per data directory (one per worker on a database server): an exclusive lock on a pid file
that dies with the process."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from runtime.errors import InstanceLocked


class InstanceLock:
    """Held for the life of a serving agentd. flock, unlike a bare pid file, is released by kill -9 too."""

    def __init__(self, data_dir: Path, *, shared_database: bool = False) -> None:
        self.path = data_dir / "agentd.pid"
        # On a database server, leases decide which agentd runs which task (store/workers.py): a second
        # agentd on this data folder serves as one more worker, under a pid file of its own.
        self.shared_database = shared_database
        self._extra = False
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _pid_written(fd)
            os.close(fd)
            if holder and self.shared_database:
                self.path = self.path.with_name(f"agentd-{os.getpid()}.pid")
                self._extra = True
                return self.acquire()
            if not holder:
                # Only a RunLock holds the file without a pid in it.
                raise InstanceLocked(
                    f"an `agentd task run` is running tasks in {self.path.parent}; let it finish or stop it first"
                ) from None
            raise InstanceLocked(
                f"another agentd (pid {holder}) is already serving {self.path.parent}; stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def announce(self, address: str) -> None:
        """Say where this agentd's page is, next to its pid, for `agentd status` and `agentd stop`."""
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n{address}\n".encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            if self._extra:
                self.path.unlink(missing_ok=True)  # named after this process: nobody else will take it
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class RunLock:
    """Held by `agentd task run` while it runs a task: a shared lock on the daemon's pid file, so runs
    in the foreground go side by side, but none starts while a daemon serves the data directory (which
    would run the same task at the same time) and no daemon starts while one runs."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "agentd.pid"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _pid_written(fd) or "unknown"
            os.close(fd)
            raise InstanceLocked(
                f"an agentd (pid {holder}) serves {self.path.parent} and runs its tasks itself"
            ) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _pid_written(fd: int) -> str:
    """The pid the serving agentd wrote into the file, or "" when it wrote none."""
    return os.pread(fd, 32, 0).decode(errors="replace").split("\n")[0].strip()


def holder_pid(data_dir: Path) -> int | None:
    """The pid of the agentd serving `data_dir`, or None when nobody holds the lock."""
    found = holder(data_dir)
    return None if found is None else found[0]


def holder(data_dir: Path) -> tuple[int, str | None] | None:
    """(pid, page address) of the agentd serving `data_dir`, or None when nobody holds the lock."""
    return _held(data_dir / "agentd.pid")


def holders(data_dir: Path) -> list[tuple[int, str | None]]:
    """(pid, page address) of every agentd serving `data_dir`: the first, then the further workers that
    serve one database from it under pid files of their own."""
    paths = [data_dir / "agentd.pid", *sorted(data_dir.glob("agentd-*.pid"))]
    return [found for found in map(_held, paths) if found is not None]


def _held(path: Path) -> tuple[int, str | None] | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            lines = os.pread(fd, 512, 0).decode(errors="replace").split()
            if not lines or not lines[0].isdigit():
                return None
            return int(lines[0]), (lines[1] if len(lines) > 1 else None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

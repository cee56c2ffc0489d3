"""A write the machine refused (a full disk, a read-only one, no permission), said in one line.

Such a failure is the host's, not agentd's: the user is told which file system and which file, never
shown an internal error. SQLite reports the same faults in its own words ("disk I/O error" when it
cannot grow its shared-memory file on a full disk), so for a store error the data directory's file
system is asked what it is.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
from pathlib import Path

# What the host refuses, as opposed to a file agentd itself got wrong (a missing one, say).
REFUSALS = {
    errno.ENOSPC: "no space left on",
    errno.EDQUOT: "disk quota exceeded on",
    errno.EROFS: "read-only file system:",
    errno.EACCES: "permission denied:",
    errno.EPERM: "operation not permitted:",
    errno.EIO: "input/output error on",
}

# SQLite's primary result codes for a write the file system refused (extended codes share the low byte).
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 8, 10, 13, 14
# Less free space than this makes a store's I/O failure a full disk: SQLite needs room for a few pages
# of its log and shared memory, more than the last blocks a full file system keeps.
_NEARLY_FULL_BYTES = 1 << 20


def describe(e: BaseException, data_dir: Path | None = None) -> str | None:
    """The one line for `e` if the host refused a write, or None if `e` is something else. A store
    error keeps its own words after the file system's: they name the database."""
    if isinstance(e, OSError) and e.errno in REFUSALS:
        target = Path(e.filename) if e.filename else data_dir
        if target is None:
            return f"{REFUSALS[e.errno]} {e.strerror}"
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
            return f"{REFUSALS[e.errno]} {file_system(target)}: {target}"
        return f"{REFUSALS[e.errno]} {target}"
    if data_dir is not None and _sqlite_io_failure(e):
        state = _data_dir_state(data_dir)
        return None if state is None else f"{state} ({e})"
    return None


def file_system(path: Path) -> str:
    """The device holding `path` and where it is mounted ("/dev/vda1 (mounted at /)")."""
    mount = _mount_point(path)
    device = _devices().get(str(mount))
    return f"{device} (mounted at {mount})" if device else f"the file system mounted at {mount}"


def read_only(path: Path) -> bool:
    """Whether `path` (an existing folder) cannot be written: a read-only mount, or no permission."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return True
    except OSError:
        return False
    return not os.access(path, os.W_OK)


def _data_dir_state(data_dir: Path) -> str | None:
    try:
        st = os.statvfs(data_dir)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return f"read-only file system: {data_dir}"
    if not os.access(data_dir, os.W_OK):
        return f"permission denied: {data_dir} is read-only to this user"
    if st.f_bavail * st.f_frsize < _NEARLY_FULL_BYTES:
        return f"no space left on {file_system(data_dir)}: {data_dir}"
    return None


def _sqlite_io_failure(e: BaseException) -> bool:
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        orig = getattr(cause, "orig", None)  # SQLAlchemy's wrapper of the driver's error
        for candidate in (cause, orig):
            if isinstance(candidate, sqlite3.Error):
                code = (getattr(candidate, "sqlite_errorcode", None) or 0) & 0xFF
                if code in (_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN):
                    return True
        cause = cause.__cause__ or cause.__context__
    return False


def _mount_point(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def _devices() -> dict[str, str]:
    """Mount point -> device, from /proc/self/mounts (the last mount on a point is the one in use)."""
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            found[_unescape(fields[1])] = _unescape(fields[0])
    return found


def _unescape(field: str) -> str:
    # The kernel writes a space in a path as \040, a tab as \011, and so on.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)

"""Files of a skill folder as agentd reads them: regular files only, up to a size, never waiting.

A skill folder comes from anywhere. Its SKILL.md can be a FIFO (opening it for reading waits for a
writer forever), a link to /dev/zero (a read that never ends) or a file of gigabytes, and the
catalog reads every SKILL.md for every task. So a skill's files are opened without blocking and
without following a final symlink, checked on the open descriptor, and read up to a limit.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from store.errors import AgentdError

_NOT_REGULAR = {
    stat.S_IFDIR: "it is a folder",
    stat.S_IFIFO: "it is a FIFO (a named pipe), not a regular file",
    stat.S_IFCHR: "it is a device, not a regular file",
    stat.S_IFBLK: "it is a device, not a regular file",
    stat.S_IFSOCK: "it is a socket, not a regular file",
}


class UnreadableFile(AgentdError):
    """A skill's file that is not read, with the reason in words (`reason`) for a diagnostic or a finding."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them; UnreadableFile otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnreadableFile("it became a symlink while being opened") from None
        raise UnreadableFile(e.strerror or str(e)) from None
    try:
        st = os.fstat(fd)
        kind = stat.S_IFMT(st.st_mode)
        if kind != stat.S_IFREG:
            raise UnreadableFile(_NOT_REGULAR.get(kind, "it is not a regular file"))
        if st.st_size > limit:
            raise UnreadableFile(f"it is {st.st_size:,} bytes, over the limit of {limit:,}")
        chunks, size = [], 0
        # O_NONBLOCK stays set on the descriptor; a regular file never answers EAGAIN, so plain reads do.
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise UnreadableFile(f"it grew past the limit of {limit:,} bytes while being read")
    return b"".join(chunks)


def resolve_inside(path: Path, folder: Path) -> Path:
    """`path` with every link followed, if that is inside `folder` (itself resolved) and exists;
    UnreadableFile otherwise. A skill's folder may be a link; a file in it may not lead out of it."""
    real = Path(os.path.realpath(path))
    shown = os.readlink(path) if os.path.islink(path) else str(real)
    if not real.is_relative_to(os.path.realpath(folder)):
        raise UnreadableFile(
            f"it is a symlink to {shown}, outside the skill's folder; agentd reads only files inside it"
        )
    if not os.path.lexists(real):
        raise UnreadableFile(f"it is a symlink to {shown}, which does not exist")
    return real

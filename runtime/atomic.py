"""Atomic replacement of a file: a reader sees the old content or the new, and a crash leaves one of them."""

from __future__ import annotations

import ctypes
import os
import stat
import tempfile
from pathlib import Path


def replace_file(path: Path, data: bytes, *, mode: int | None = None, sync: bool = True) -> None:
    """Write `data` to a temporary file beside `path`, flush it to disk, and rename it over `path`.

    The file gets `mode`, or keeps its permission bits (0o644 when new). OSError propagates for the
    caller to word, naming `path` (a failed write names no file of its own); the temporary file is gone
    either way.
    """
    if mode is None:
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror, str(path)) from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fsync_dir(folder: Path) -> None:
    """Flush a directory's entries: a rename or a new file is durable only once its entry is."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(folder: Path) -> None:
    """Flush everything written to the file system that holds `folder` (Linux's syncfs; elsewhere sync)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(folder, os.O_RDONLY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    except (AttributeError, OSError):
        pass
    os.sync()

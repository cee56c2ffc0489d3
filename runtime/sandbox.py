"""A sandbox for code the model writes: bubblewrap namespaces, rlimits and a pids cgroup, built once here.

What a snippet gets: the system's /usr read-only, the workspace read-only as its current folder (with
agentd's own data hidden under an empty tmpfs, even where the data folder sits inside the workspace),
a scratch /tmp that is discarded, /proc and a minimal /dev. Nothing else of the host: no /etc (so no
/etc/shadow, no resolver), no home folder, no network (its own empty network namespace), no other
process visible (its own pid namespace, torn down with it), no environment but PATH, HOME and LANG.

What bounds it: CPU seconds, address space, file size and open files as rlimits it sets on itself
before the snippet runs; processes by a pids cgroup where one can be made, else by RLIMIT_NPROC. The
kernel does not apply RLIMIT_NPROC to root, so as root without a writable pids cgroup the sandbox says
it cannot run rather than run a snippet a fork bomb could take the host down with. The wall time and
the output size are the caller's (run_process kills the process group at the deadline, and
`--die-with-parent` takes the namespace down with it).

Where bubblewrap is missing or cannot make namespaces, `problem()` says why in one line: the tool is
then not offered, and `agentd status` prints that line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SCRATCH = "/tmp"
INSIDE = "/workspace"
_SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/sbin")
_CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 10
    memory_mb: int = 512
    processes: int = 32
    file_mb: int = 16
    open_files: int = 64
    scratch_mb: int = 32


# Runs inside the sandbox before the snippet: the limits it sets on itself hold for whatever it starts.
_PRELUDE = """\
import resource, sys
for limit, value in {limits}:
    resource.setrlimit(limit, (value, value))
snippet = sys.argv[1]
sys.argv = ["<snippet>"]
exec(compile(snippet, "<snippet>", "exec"), {{"__name__": "__main__", "__builtins__": __builtins__}})
"""


class Sandbox:
    def __init__(self, limits: Limits = Limits(), *, bwrap: str | None = "bwrap", python: str | None = None) -> None:
        """`bwrap`: the program, found on PATH; None stands for a host without it."""
        self.limits = limits
        self.bwrap = shutil.which(bwrap) if bwrap is not None else None
        self.python = python or _system_python()

    def problem(self) -> str | None:
        """Why the sandbox cannot run here, in one line; None when it can."""
        return _probe(self.bwrap, self.python, os.geteuid() == 0 and _cgroup_root() is None)

    @contextlib.contextmanager
    def command(self, code: str, workspace: Path, hidden: Sequence[Path] = ()) -> Iterator[list[str]]:
        """The argv that runs `code`, for as long as the block lasts (its pids cgroup is removed after)."""
        with _pids_cgroup(self.limits.processes) as procs:
            argv = [*self._bwrap(workspace, hidden), self.python, "-I", "-S", "-c", self._prelude(procs), code]
            if procs is not None:
                # The shell joins the cgroup before it becomes bwrap: nothing runs outside the bound.
                argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]
            yield argv

    def _bwrap(self, workspace: Path, hidden: Sequence[Path]) -> list[str]:
        argv = [str(self.bwrap), "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", SCRATCH, "--setenv", "LANG", "C.UTF-8",
                "--setenv", "PYTHONDONTWRITEBYTECODE", "1"]
        argv += _system_binds()
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(self.limits.scratch_mb * 1024 * 1024), "--tmpfs", SCRATCH,
                 "--ro-bind", str(workspace), INSIDE]
        root = Path(os.path.realpath(workspace))
        for path in hidden:
            real = Path(os.path.realpath(path))
            if real != root and real.is_relative_to(root) and real.exists():
                argv += ["--tmpfs", f"{INSIDE}/{real.relative_to(root).as_posix()}"]
        return [*argv, "--chdir", INSIDE]

    def _prelude(self, procs: Path | None) -> str:
        mb = 1024 * 1024
        limits = [("resource.RLIMIT_CPU", self.limits.cpu_s), ("resource.RLIMIT_AS", self.limits.memory_mb * mb),
                  ("resource.RLIMIT_FSIZE", self.limits.file_mb * mb),
                  ("resource.RLIMIT_NOFILE", self.limits.open_files), ("resource.RLIMIT_CORE", 0)]
        if procs is None:
            # Counted per user across the host: the processes the user has now, and this many more.
            limits.append(("resource.RLIMIT_NPROC", _processes_of(os.geteuid()) + self.limits.processes))
        return _PRELUDE.format(limits="(" + "".join(f"({name}, {value}), " for name, value in limits) + ")")


def _system_binds() -> list[str]:
    """The system's programs and libraries, read-only: merged-/usr links as links, other folders bound."""
    argv: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    return argv


def _system_python() -> str:
    """A Python under /usr, which the sandbox binds: a virtualenv's interpreter links to one."""
    real = os.path.realpath(sys.executable)
    return real if real.startswith("/usr/") else "/usr/bin/python3"


@functools.cache
def _probe(bwrap: str | None, python: str, root_unbounded: bool) -> str | None:
    if bwrap is None:
        return "bubblewrap is not installed (Debian: apt install bubblewrap)"
    if root_unbounded:
        return "running as root with no writable pids cgroup, so a snippet's processes could not be bounded"
    try:
        done = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", *_system_binds(),
                               python, "-I", "-S", "-c", "pass"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap could not be run: {e}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"bubblewrap cannot make its namespaces here: {said}"
    return None


def _cgroup_root() -> Path | None:
    """A pids cgroup this process may make children in: cgroup v1's pids hierarchy, or a v2 root that
    hands the pids controller down. None when neither is writable (the usual case for a user)."""
    v1, v2 = _CGROUP_ROOTS
    if (v1 / "cgroup.procs").exists() and os.access(v1, os.W_OK):
        return v1
    if "pids" in _read(v2 / "cgroup.subtree_control").split() and os.access(v2, os.W_OK):
        return v2
    return None


@contextlib.contextmanager
def _pids_cgroup(limit: int) -> Iterator[Path | None]:
    root = _cgroup_root()
    if root is None:
        yield None
        return
    group = root / f"agentd-sandbox-{uuid.uuid4().hex[:12]}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(limit))
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        yield None
        return
    try:
        yield group / "cgroup.procs"
    finally:
        # The pid namespace died with the sandbox; its last processes may take a moment to be reaped.
        for _ in range(100):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)


def _processes_of(uid: int) -> int:
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                n += entry.stat().st_uid == uid
    return n


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""

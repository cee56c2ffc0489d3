"""The python tool's sandbox, escape-tested for real: bubblewrap namespaces, rlimits and a pids cgroup on
this host. Each test tries one way out (the network, a write, a host file, agentd's database, a link out
of the workspace, too many processes, too much memory, an endless loop, a flood of output) and checks
that the snippet could not, and that the host is as it was."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from runtime.artifacts import ArtifactStore
from runtime.sandbox import Limits, Sandbox
from runtime.tools.contract import Effect, ToolContext, ToolFailure
from runtime.tools.python import Python, PythonArgs
from runtime.tools.shell import ShellOutput

pytestmark = pytest.mark.skipif(Sandbox().problem() is not None, reason=f"no sandbox: {Sandbox().problem()}")


@pytest.fixture
def sandboxed(tmp_path: Path) -> Path:
    """A workspace with a table, agentd's data folder inside it (as by default), and a link out of it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orders.csv").write_text("id,amount\n1,12.50\n2,8.00\n3,30.25\n")
    (ws / ".agentd").mkdir()
    (ws / ".agentd" / "agentd.db").write_bytes(b"SQLite format 3\x00 the event log")
    (tmp_path / "outside.txt").write_text("a secret next to the workspace\n")
    (ws / "up").symlink_to(tmp_path / "outside.txt")
    (ws / "passwd").symlink_to("/etc/passwd")
    return ws


DEFAULT = Limits()


def run(ws: Path, code: str, *, limits: Limits = DEFAULT, timeout_s: float = 20) -> ShellOutput:
    ctx = ToolContext(task_id="t-1", tenant="default", actor="tester", workspace=ws,
                      artifacts=ArtifactStore(ws / ".agentd" / "artifacts"), protected=(ws / ".agentd",))
    tool = Python(Sandbox(limits), timeout_s=timeout_s)
    return tool.run(ctx.for_call(timeout_s), PythonArgs(code=code))


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def test_a_snippet_reads_the_workspace_and_prints_what_it_computes(sandboxed: Path) -> None:
    out = run(sandboxed, "import csv\nprint(sum(float(r['amount']) for r in csv.DictReader(open('orders.csv'))))")
    assert (out.exit_code, out.stdout) == (0, "50.75\n")


def test_the_tool_is_a_read_that_needs_no_approval() -> None:
    contract = Python().contract
    assert contract.effects == (Effect.READ,) and not contract.needs_approval and contract.idempotent


def test_it_cannot_write_the_workspace_and_its_scratch_folder_is_thrown_away(sandboxed: Path, tmp_path: Path) -> None:
    before = files_of(tmp_path)
    out = run(sandboxed, "open('/tmp/scratch.txt', 'w').write('x')\nprint(open('/tmp/scratch.txt').read())\n"
                         "open('orders.csv', 'a').write('4,1.00\\n')")
    assert out.stdout == "x\n" and "Read-only file system" in out.stderr
    assert files_of(tmp_path) == before
    assert not Path("/tmp/scratch.txt").exists() or Path("/tmp/scratch.txt").read_text() != "x"


@pytest.mark.parametrize("target", ["/etc/shadow", "/etc/passwd", "/root/.ssh/id_rsa", "host /proc", "next door"])
def test_it_cannot_read_host_files(sandboxed: Path, target: str) -> None:
    target = {"host /proc": f"/proc/{os.getpid()}/environ",
              "next door": str(sandboxed.parent / "outside.txt")}.get(target, target)
    out = run(sandboxed, f"print(open({target!r}).read())")
    assert out.exit_code != 0 and out.stdout == ""
    assert "root:" not in out.stderr and "secret" not in out.stderr


def test_links_out_of_the_workspace_lead_nowhere(sandboxed: Path) -> None:
    for link in ("up", "passwd"):
        out = run(sandboxed, f"print(open({link!r}).read())")
        assert out.exit_code != 0 and "secret" not in out.stdout and "root:" not in out.stdout


def test_agentds_data_is_hidden_though_it_sits_in_the_workspace(sandboxed: Path) -> None:
    out = run(sandboxed, "import os\nprint(sorted(os.listdir('.')), os.listdir('.agentd'))")
    assert out.stdout == "['.agentd', 'orders.csv', 'passwd', 'up'] []\n"
    assert (sandboxed / ".agentd" / "agentd.db").read_bytes().startswith(b"SQLite format 3")


def test_there_is_no_network(sandboxed: Path) -> None:
    # A server on the host's loopback: the sandbox's own loopback must not reach it.
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    try:
        out = run(sandboxed, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('in')")
        assert out.exit_code != 0 and out.stdout == "" and not accepted
        out = run(sandboxed, "import socket\nsocket.getaddrinfo('example.org', 443)")
        assert out.exit_code != 0
    finally:
        server.close()


def test_an_environment_with_secrets_does_not_reach_it(sandboxed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_TOKEN", "sk-live-123")
    monkeypatch.setenv("HARMLESS", "yes")
    out = run(sandboxed, "import os\nprint(sorted(os.environ))")
    assert "API_TOKEN" not in out.stdout and "HARMLESS" not in out.stdout


def host_processes() -> int:
    return sum(1 for e in os.scandir("/proc") if e.name.isdigit())


def test_a_fork_bomb_is_bounded_and_leaves_nothing_behind(sandboxed: Path) -> None:
    before = host_processes()
    out = run(sandboxed, "import os\nn = 0\nwhile True:\n    try:\n        os.fork()\n        n += 1\n"
                         "    except OSError:\n        print('refused after', n, flush=True)\n        os._exit(0)",
              limits=Limits(processes=16, cpu_s=5), timeout_s=15)
    assert "refused after" in out.stdout
    # Every process of the sandbox is gone with it (a few others on the host may come and go), and
    # so is the cgroup that bounded them.
    assert host_processes() <= before + 3
    assert not [p for p in Path("/sys/fs/cgroup/pids").glob("agentd-sandbox-*")]


def test_a_memory_bomb_is_a_memory_error(sandboxed: Path) -> None:
    out = run(sandboxed, "x = bytearray(2 * 1024 ** 3)\nprint('allocated')", limits=Limits(memory_mb=256))
    assert out.exit_code != 0 and "MemoryError" in out.stderr and out.stdout == ""


def test_an_endless_loop_is_stopped_by_its_cpu_bound_or_the_deadline(sandboxed: Path) -> None:
    out = run(sandboxed, "while True:\n    pass", limits=Limits(cpu_s=1), timeout_s=20)
    assert out.exit_code != 0  # SIGXCPU, then SIGKILL: killed by the kernel, not by the deadline
    with pytest.raises(ToolFailure) as failed:
        run(sandboxed, "import time\nwhile True:\n    time.sleep(1)", timeout_s=2)
    assert failed.value.code == "timeout"


def test_a_flood_of_output_is_cut_and_counted(sandboxed: Path) -> None:
    out = run(sandboxed, "import sys\nsys.stdout.write('y' * 50_000_000)")
    assert out.stdout_bytes == 50_000_000 and len(out.stdout) <= 17 * 1024  # the cap, and a marker where it was cut


def test_a_missing_sandbox_is_a_clear_failure_not_an_unsandboxed_run(sandboxed: Path) -> None:
    sandbox = Sandbox(bwrap=None)
    assert "bubblewrap is not installed" in (sandbox.problem() or "")
    ctx = ToolContext(task_id="t-1", tenant="default", actor="tester", workspace=sandboxed,
                      artifacts=ArtifactStore(sandboxed / ".agentd" / "artifacts"))
    with pytest.raises(ToolFailure) as failed:
        Python(sandbox).run(ctx.for_call(5), PythonArgs(code="print(1)"))
    assert failed.value.code == "sandbox_unavailable"

"""What the machine can refuse agentd: a port someone else holds, a full disk, a read-only data
directory, a damaged database page. Each ends in one line on stderr and a documented exit code
(0 ok, 1 error, 2 bad usage or setting, 130 interrupted, 70 only for agentd's own bug), and loses
nothing that was committed.

The disk cases are real: a small tmpfs or a read-only bind mount, made in a user and mount namespace
of their own (`unshare --user --map-root-user --mount`), so they need no root and work as root too,
where chmod would not stop a write. Where the kernel refuses such namespaces they are skipped.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import click
import pytest

from runtime.cli import cli, main
from runtime.errors import ConfigError
from tests.helpers import REPO, free_port

AGENTD = [sys.executable, "-m", "runtime.cli"]


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr[-3000:]
    assert lines[0].startswith("agentd: "), lines[0]
    return lines[0]


# -- a port in use --------------------------------------------------------------------------------


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A port another program listens on (and never answers)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@contextlib.contextmanager
def healthy_impostor() -> Iterator[int]:
    """A port another web server holds, which answers every GET, /healthz included, with 200 and JSON."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"status": "ok"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_serve_on_a_port_in_use_says_so_in_one_line_before_announcing_anything(agentd) -> None:
    with held_port() as port:
        served = agentd("serve", "--port", str(port), "--model", "smollm2-135m")
    assert served.returncode == 1
    line = one_line(served.stderr)
    assert f"port {port}" in line and "in use" in line
    assert "web page" not in served.stdout and "token=" not in served.stdout


def test_start_on_a_port_another_server_answers_fails_with_the_daemons_own_reason(agentd) -> None:
    assert agentd("db", "upgrade").returncode == 0  # status reads a database; a start refused makes none
    with healthy_impostor() as port:
        started = agentd("start", "--port", str(port), "--model", "smollm2-135m", timeout=120)
        try:
            assert started.returncode == 1, started.stdout
            line = one_line(started.stderr)
            assert f"port {port}" in line and "in use" in line
            assert "started" not in started.stdout
        finally:
            if json.loads(agentd("status", "--json").stdout)["running"]:
                agentd("stop", timeout=150)
    assert json.loads(agentd("status", "--json").stdout)["running"] is False


# -- exception groups -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "code", "said"),
    [
        # A task group's failure, as anyio raises it: the cause is the AgentdError inside.
        (ExceptionGroup("unhandled errors in a TaskGroup", [ConfigError("port must be a number")]), 2,
         "agentd: port must be a number"),
        # Nested, with a cancellation beside it: the first real cause still wins.
        (BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [KeyboardInterrupt()])]), 130, ""),
        (ExceptionGroup("outer", [ExceptionGroup("inner", [RuntimeError("boom")])]), 70,
         "agentd: internal error: RuntimeError: boom"),
        (ExceptionGroup("outer", [OSError(errno.ENOSPC, "No space left on device", "/data/agentd.log")]), 1,
         "agentd: no space left on "),
    ],
)
def test_an_exception_group_is_reported_as_its_first_real_cause(
    raised: BaseException, code: int, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    @click.command("explode")
    def explode() -> None:
        raise raised

    cli.add_command(explode)
    try:
        with pytest.raises(SystemExit) as exited:
            main(["explode"])
    finally:
        cli.commands.pop("explode")
    err = capsys.readouterr().err
    assert exited.value.code == code, err
    assert "Group" not in err and "Traceback" not in err
    if said:
        assert one_line(err).startswith(said), err
    else:
        assert err.strip() == ""


# -- a damaged database page ----------------------------------------------------------------------


def test_serve_on_a_damaged_database_page_ends_with_the_clear_line(agentd, tmp_path: Path) -> None:
    import sqlite3

    env = {"AGENTD_DATA_DIR": str(tmp_path / "data")}
    for n in range(20):
        assert agentd("task", "submit", f"task {n} " + "x" * 300, env=env).returncode == 0
    db = tmp_path / "data" / "agentd.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'tasks'").fetchone()[0]
    with db.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xff" * page_size)

    served = agentd("serve", "--port", str(free_port()), "--model", "smollm2-135m", env=env, timeout=120)
    assert served.returncode == 1, served.stderr[-3000:]
    assert "Traceback" not in served.stderr and "internal error" not in served.stderr
    last = served.stderr.strip().splitlines()[-1]
    assert last.startswith("agentd: database ") and "corrupt" in last, served.stderr[-3000:]


# -- running inside a namespace of our own ----------------------------------------------------------


@pytest.fixture(scope="session")
def namespaces() -> None:
    """The full and read-only disks are real ones, made in a namespace of the test's own. A machine that
    cannot make one fails these tests rather than skipping them: a skip would pass a disk fault untested
    (util-linux's unshare is in every Debian base, and CI's machines allow user namespaces)."""
    try:
        tried = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    except FileNotFoundError:
        pytest.fail("the disk-fault tests need unshare(1) (util-linux)")
    if tried.returncode != 0:
        pytest.fail(f"the disk-fault tests need user namespaces, refused here: {tried.stderr.decode().strip()}")


def in_namespace(function: str, **kwargs: Any) -> Any:
    """Call `function` of this module in a new user and mount namespace (root in it, our own uid
    outside), where it may mount what it likes; return what it returns (JSON)."""
    code = (
        "import json, sys\n"
        f"from tests.test_host_faults import {function} as f\n"
        "print(json.dumps(f(**json.loads(sys.argv[1]))))\n"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", code, json.dumps(kwargs)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))},
    )
    assert done.returncode == 0, done.stderr[-5000:]
    return json.loads(done.stdout.splitlines()[-1])


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> dict:
    done = subprocess.run([*AGENTD, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return {"code": done.returncode, "out": done.stdout, "err": done.stderr}


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


def fill(path: Path) -> None:
    """Write to `path` until the file system holding it has no space left."""
    with path.open("ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    with path.open("ab", buffering=0) as f:  # the last few blocks, smaller than one chunk
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 512)


# -- a full disk ----------------------------------------------------------------------------------


def full_disk_artifact_put(root: str) -> dict:
    from runtime.artifacts import ArtifactStore

    data = Path(root) / "data"
    mount_tmpfs(data, "256k")
    store = ArtifactStore(data / "artifacts")
    try:
        store.put(os.urandom(512 * 1024))
    except OSError as e:
        error = {"errno": e.errno, "filename": e.filename}
    else:
        error = None
    left = sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_file())
    return {"error": error, "left": left}


def test_an_artifact_that_does_not_fit_names_its_file_and_leaves_nothing_behind(namespaces, tmp_path: Path) -> None:
    found = in_namespace("full_disk_artifact_put", root=str(tmp_path))
    assert found["error"] is not None and found["error"]["errno"] == errno.ENOSPC
    assert found["error"]["filename"] and "/artifacts/" in found["error"]["filename"]
    assert found["left"] == []


def full_disk_commands(root: str) -> dict:
    data = Path(root) / "data"
    mount_tmpfs(data, "2m")
    env = {"AGENTD_DATA_DIR": str(data)}
    first = run("task", "submit", "before the disk filled", env=env)
    fill(data / "filler")
    return {
        "first": first,
        "submit": run("task", "submit", "after the disk filled", env=env),
        "list": run("task", "list", "--json", env=env),
    }


def test_a_command_on_a_full_disk_says_so_in_one_line(namespaces, tmp_path: Path) -> None:
    found = in_namespace("full_disk_commands", root=str(tmp_path))
    assert found["first"]["code"] == 0, found["first"]["err"]
    # Reading fails too: SQLite cannot make the shared-memory file its log needs beside the database.
    for done in (found["submit"], found["list"]):
        assert done["code"] == 1, done
        line = one_line(done["err"])
        assert line.startswith("agentd: no space left on tmpfs (mounted at "), line


FILLER_PLUGIN = '''
"""A tool that fills the disk holding the data directory, once: what a big download would do."""
import os
from pathlib import Path
from pydantic import BaseModel
from runtime.agent.profiles import WORKSPACE
from runtime.tools import Effect, Tool, ToolContract


class Args(BaseModel):
    model_config = {"extra": "forbid"}


class Out(BaseModel):
    filled: bool


class FillDisk(Tool):
    contract = ToolContract(name="fill_disk", description="Fill the disk.", input_model=Args,
                            output_model=Out, effects=(Effect.WRITE,), idempotent=True, scope="workspace",
                            timeout_s=30)

    def run(self, ctx, args):
        done = Path(os.environ["FILLED_ONCE"])
        if done.exists():
            return Out(filled=False)
        done.touch()
        with open(os.environ["FILLER"], "ab", buffering=0) as f:
            for size in (65536, 512):
                try:
                    while True:
                        f.write(b"\\0" * size)
                except OSError:
                    pass
        return Out(filled=True)


def register(tools, profiles):
    tools.register(FillDisk())
    profiles["filler"] = WORKSPACE.model_copy(update={"name": "filler", "tools": ("fill_disk",)})
'''


def full_disk_daemon(root: str, model_url: str, full: str) -> dict:
    """`agentd serve` running a task whose tool fills the disk under `full` (a folder of the data
    directory, or all of it); the disk is given its space back once the daemon has said it is full."""
    tmp = Path(root)
    data = tmp / "data"
    filler = data / full / "filler"
    mount_tmpfs(filler.parent, "16m")
    (tmp / "ws").mkdir()
    (tmp / "filler_plugin.py").write_text(FILLER_PLUGIN)
    env = {"AGENTD_DATA_DIR": str(data), "AGENTD_WORKSPACE": str(tmp / "ws"), "AGENTD_MODEL_URL": model_url,
           "AGENTD_MODEL": "smollm2-135m", "AGENTD_N_CTX": "8192",
           "AGENTD_PLUGINS": str(tmp / "filler_plugin.py"), "FILLER": str(filler),
           "FILLED_ONCE": str(tmp / "filled-once")}
    submitted = run("task", "submit", "--profile", "filler", "--allow", "write", "--max-steps", "4",
                    "Fill the disk, then answer.", env=env)
    task_id = submitted["out"].strip()
    stderr_path = tmp / "serve.err"
    with stderr_path.open("w") as stderr:
        server = subprocess.Popen([*AGENTD, "serve", "--port", str(free_port())], env={**os.environ, **env},
                                  stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    said, phase = "", "?"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None:
            said = stderr_path.read_text()
            if "no space left" in said or "disk is full" in said:
                break
            time.sleep(0.2)
        alive_when_full = server.poll() is None
        filler.unlink()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and server.poll() is None:
            shown = run("task", "show", task_id, "--json", env=env)
            phase = json.loads(shown["out"])["summary"]["phase"] if shown["code"] == 0 else phase
            if phase in ("completed", "failed"):
                break
            time.sleep(0.5)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    events = run("events", "list", "--task", task_id, "--json", env=env)["out"].splitlines()
    return {
        "submitted": submitted,
        "alive_when_full": alive_when_full,
        "full_said": said,
        "serve_code": server.returncode,
        "serve_err": stderr_path.read_text(),
        "phase": phase,
        "interrupted": [
            json.loads(e)["payload"]["reason"] for e in events if json.loads(e)["type"] == "RunInterrupted"
        ],
        "left": sorted(str(p.relative_to(data)) for p in data.rglob("*.tmp")),
        "check": run("db", "check", env=env),
        "replay": run("replay", env=env),
    }


@pytest.fixture
def scripted_model(tmp_path: Path) -> Iterator[str]:
    from tests.helpers.daemon import scripted_endpoint

    with scripted_endpoint(tmp_path, [
        {"action": "call_tool", "tool": "fill_disk", "arguments": {}, "reason": "r"},
        # Not "Done.": fill_disk writes outside the workspace, so no file change backs a claim of one.
        {"action": "final_answer", "answer": "fill_disk has answered.", "sources": []},
    ], delay_s=0.2) as url:
        yield url


@pytest.mark.slow
@pytest.mark.parametrize("full", [
    # The artifact store's write fails (an OSError) while the database can still record why.
    "artifacts",
    # The database's too (SQLite's "disk is full"): the reason is recorded once there is space again.
    ".",
])
def test_a_full_disk_interrupts_the_task_with_its_reason_and_it_goes_on_once_there_is_space(
    namespaces, scripted_model: str, tmp_path: Path, full: str
) -> None:
    found = in_namespace("full_disk_daemon", root=str(tmp_path), model_url=scripted_model, full=full)
    assert found["submitted"]["code"] == 0, found["submitted"]
    assert found["alive_when_full"], found["serve_err"][-3000:]
    err = found["serve_err"]
    assert "Traceback" not in err and "Logging error" not in err and "internal error" not in err, err[-3000:]
    said = [line for line in err.splitlines() if "no space left" in line or "disk is full" in line]
    assert said, err[-3000:]
    assert found["interrupted"] and all(
        "no space left" in reason or "disk is full" in reason for reason in found["interrupted"]
    ), found["interrupted"]
    assert found["phase"] == "completed", err[-3000:]
    assert found["serve_code"] == 0, err[-3000:]
    assert found["left"] == []
    assert found["check"]["code"] == 0, found["check"]
    assert found["replay"]["code"] == 0, found["replay"]


# -- a read-only data directory -------------------------------------------------------------------


def read_only_commands(root: str) -> dict:
    tmp = Path(root)
    data = tmp / "data"
    env = {"AGENTD_DATA_DIR": str(data)}
    submitted = run("task", "submit", "written before the directory became read-only", env=env)
    subprocess.run(["mount", "--bind", str(data), str(data)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(data)], check=True)
    readers = {
        "task list": run("task", "list", "--json", env=env),
        "events list": run("events", "list", "--json", env=env),
        "events export": run("events", "export", "-o", str(tmp / "log.jsonl"), env=env),
        "replay": run("replay", env=env),
        "db check": run("db", "check", env=env),
        "status": run("status", "--json", env=env),
    }
    writers = {
        "task submit": run("task", "submit", "one more", env=env),
        "serve": run("serve", "--port", str(free_port()), "--model", "smollm2-135m", env=env),
        "start": run("start", "--port", str(free_port()), "--model", "smollm2-135m", env=env),
    }
    exported = (tmp / "log.jsonl").read_text() if (tmp / "log.jsonl").exists() else ""
    return {"submitted": submitted, "readers": readers, "writers": writers, "exported": exported}


def test_a_read_only_data_directory_is_read_and_writing_to_it_is_refused_in_one_line(
    namespaces, tmp_path: Path
) -> None:
    found = in_namespace("read_only_commands", root=str(tmp_path))
    assert found["submitted"]["code"] == 0, found["submitted"]
    for name, done in found["readers"].items():
        assert done["code"] == 0, (name, done)
        assert "Traceback" not in done["err"], (name, done["err"][-3000:])
    assert "written before the directory became read-only" in found["readers"]["task list"]["out"]
    assert json.loads(found["readers"]["status"]["out"])["running"] is False
    assert "TaskSubmitted" in found["exported"]
    for name, done in found["writers"].items():
        assert done["code"] == 1, (name, done)
        line = one_line(done["err"])
        assert "read-only" in line or "readonly" in line, (name, line)

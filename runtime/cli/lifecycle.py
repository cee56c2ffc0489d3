"""`agentd start | stop | status`: the daemon in the background, its stop, and what it is doing."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from runtime.cli._app import App, daemon_options, json_option, pass_app
from runtime.cli._daemon import health as daemon_health
from runtime.cli.workers import worker_line, worker_rows
from runtime.daemon.lock import holder, holder_pid, holders
from runtime.errors import InstanceLocked, NotFound
from runtime.output import echo_json, fields_table
from store.errors import AgentdError

START_TIMEOUT_S = 90


@click.command()
@daemon_options
@pass_app
def start(app: App, model: str | None, workspace: Path | None, host: str | None, port: int | None) -> None:
    """Start agentd in the background (a detached `agentd serve`) and wait until it answers."""
    # Imported here: the daemon brings uvicorn, the web page and the agent loop, which stop and status
    # do not need.
    from runtime.daemon import service as daemon
    from runtime.inference.registry import KNOWN_MODELS

    settings = app.settings(model=model, workspace=workspace, host=host, port=port)
    running = holder_pid(settings.data_dir)
    if running is not None:
        raise InstanceLocked(f"agentd (pid {running}) is already serving {settings.data_dir}")
    out = settings.data_dir / "logs" / "daemon.out"
    out.parent.mkdir(parents=True, exist_ok=True)
    # The daemon's output is appended to; only what this start adds is its answer.
    offset = out.stat().st_size if out.is_file() else 0
    serve = ["serve"]
    if model is not None and model not in KNOWN_MODELS:
        model = str(Path(model).resolve())  # a file, named from here; a known model's name stays a name
    for name, value in (("--model", model), ("--workspace", workspace), ("--host", host), ("--port", port)):
        if value is not None:
            serve += [name, str(Path(value).resolve()) if isinstance(value, Path) else str(value)]
    # The child inherits SIGTERM blocked, and `agentd serve` unblocks it once its first line has made it a
    # clean stop: a SIGTERM sent while the interpreter starts waits for that instead of killing it.
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        with out.open("ab") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "runtime.cli", *app.root_options(), *serve],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own session: closing this terminal, or Ctrl-C in it, does not reach the daemon.
                start_new_session=True,
            )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    page = daemon.page_address(settings)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise _failed_to_start(child.returncode, out, offset)
        # The child announces its address only once the port is its own, so an answer there is its.
        if holder(settings.data_dir) == (child.pid, page) and _answers(page, settings.data_dir, child.pid):
            click.echo(f"agentd started (pid {child.pid}), serving {settings.data_dir.resolve()}\n"
                       f"  web page: {daemon.login_address(settings)}\n  output:   {out}")
            return
        time.sleep(0.2)
    raise AgentdError(f"agentd (pid {child.pid}) did not answer at {page} within {START_TIMEOUT_S} s; see {out}")


@click.command()
@click.option("--timeout", "timeout_s", type=click.IntRange(min=1), default=120, show_default=True,
              help="Seconds to wait for a decision in flight to finish.")
@pass_app
def stop(app: App, timeout_s: int) -> None:
    """Stop the daemon gracefully: no new decisions, the current append finishes, the model is released.
    Every worker serving the data folder is stopped, the further ones of a shared database too."""
    settings = app.settings()
    pids = [pid for pid, _ in holders(settings.data_dir)]
    if not pids:
        raise NotFound(f"no agentd is serving {settings.data_dir}")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # stopped meanwhile
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    left = pids
    while left and time.monotonic() < deadline:
        serving = {pid for pid, _ in holders(settings.data_dir)}
        for pid in [p for p in left if p not in serving]:
            click.echo(f"agentd (pid {pid}) stopped")
        left = [p for p in left if p in serving]
        if left:
            time.sleep(0.2)
    if left:
        raise AgentdError(
            f"agentd (pid {', '.join(map(str, left))}) did not stop within {timeout_s} s; "
            "it may be finishing a model call"
        )


@click.command()
@json_option
@pass_app
def status(app: App, as_json: bool) -> None:
    """Whether agentd runs, its tasks by phase, the notification queue's depth, and the model's state."""
    from runtime.sandbox import Sandbox
    from store import positions
    from store.queries import approvals, notifications, tasks

    settings = app.settings()
    phases: dict[str, int] = {}
    with app.reader().reading() as conn:
        for summary in tasks.summaries(conn):
            phases[summary.phase] = phases.get(summary.phase, 0) + 1
        depth = notifications.depth(conn)
        pending = approvals.count_pending(conn)
        last_seq = positions.last_seq(conn)
    serving = worker_rows(app)
    found = holder(settings.data_dir)
    pid, page = found if found is not None else (None, None)
    health = daemon_health(page, settings.data_dir) if page else None
    report = {
        "running": pid is not None,
        "pid": pid,
        "data_dir": str(settings.data_dir.resolve()),
        "tasks": phases,
        "queue_depth": depth,
        "pending_approvals": pending,
        "last_seq": last_seq,
        "running_tasks": (health or {}).get("running_tasks", []),
        "model": (health or {}).get("model_state"),
        "python_sandbox": Sandbox().problem() or "ok",
        "mcp": (health or {}).get("mcp") or [],
        "mcp_configured": sorted(settings.mcp.servers),
        "workers": serving,
    }
    if as_json:
        echo_json(report)
        return
    deciding = (health or {}).get("deciding") or {}
    if pid is None:
        running = "not running (`agentd serve` runs it here, `agentd start` in the background)"
    else:
        answers = f"its page at {page}" if health is not None else f"its page does not answer at {page}"
        running = f"running (pid {pid}), {answers}"
    click.echo(fields_table([
        ("agentd", running),
        ("data folder", report["data_dir"]),
        ("tasks", ", ".join(f"{n} {p}" for p, n in sorted(phases.items())) or "none"),
        *([("running now", "; ".join(
            f"{t} ({deciding[t]})" if t in deciding else t for t in report["running_tasks"]
        ) or "none")] if pid else []),
        # Several agentd on one database: each, and what it runs (one serving here says no more than
        # the lines above do).
        *([(f"worker {r['worker_id']}", worker_line(r)) for r in serving] if len(serving) > 1 else []),
        ("notifications", f"{depth} waiting to be taken in"),
        ("approvals", f"{pending} pending" + (" (agentd approvals list)" if pending else "")),
        ("events", last_seq),
        ("python tool", "available, in a bubblewrap sandbox, to profiles that offer it"
         if report["python_sandbox"] == "ok"
         else f"not offered: {report['python_sandbox']}"),
        *_mcp_lines(report["mcp"], report["mcp_configured"], running=health is not None),
        *_model_lines(report["model"] or {}),
    ]))


def _mcp_lines(servers: list[dict[str, Any]], configured: list[str], running: bool) -> list[tuple[str, str]]:
    """The MCP servers as the running daemon holds them; without one, only which are configured."""
    if not configured:
        return []
    if not running or not servers:
        return [("mcp servers", f"{', '.join(configured)} configured (agentd mcp list starts and lists them)")]
    lines = []
    for s in servers:
        parts = [f"{s['tools']} tools offered"]
        if s["held"]:
            parts.append(f"{s['held']} held back")
        if s["waiting_consent"]:
            parts.append(f"{s['waiting_consent']} changed, waiting for consent on the page")
        lines.append((f"mcp {s['server']}", f"{s['state']}: {', '.join(parts)}"))
    return lines


def _model_lines(model: dict[str, Any]) -> list[tuple[str, str]]:
    """The model's state as the daemon reports it (a model's `stats()`), a readable line for each part."""
    m = dict(model)
    if not m:
        return []
    about = [str(m.pop("model", "a model"))]
    if "base_url" in m:
        about.append(f"served at {m.pop('base_url')}")
    n_ctx, trained = m.pop("n_ctx", None), m.pop("n_ctx_train", None)
    if n_ctx:
        trained_on = f" (trained on {trained:,})" if trained and trained != n_ctx else ""
        about.append(f"context {n_ctx:,} tokens{trained_on}")
    lines = [("model", ", ".join(about))]
    if "path" in m:
        lines.append(("model file", str(m.pop("path"))))
    if "template" in m:
        lines.append(("chat template", str(m.pop("template"))))
    if "loaded_session" in m or "loaded_tokens" in m:
        session, tokens = m.pop("loaded_session", None), m.pop("loaded_tokens", 0) or 0
        lines.append(("model holds", f"{tokens:,} tokens of {session}" if session else "no task's tokens"))
    kv = m.pop("kv_cache", None)
    if isinstance(kv, dict):
        lines.append(("kv cache", _kv_line(kv)))
    # What a model reports that is not named above, still said in words.
    lines.extend((f"model {k.replace('_', ' ')}", _words(v)) for k, v in m.items())
    return lines


def _kv_line(kv: dict[str, Any]) -> str:
    return (
        f"{kv.get('entries', 0)} saved task states, {_mib(kv.get('bytes', 0))} of {_mib(kv.get('capacity_bytes', 0))}; "
        f"{kv.get('hits', 0)} hits, {kv.get('misses', 0)} misses, {kv.get('evictions', 0)} evicted, "
        f"{kv.get('rejected', 0)} too large to keep"
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _words(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {_words(v)}" for k, v in value.items()) or "none"
    return "-" if value is None else str(value)


def _answers(page: str, data_dir: Path, pid: int) -> bool:
    health = daemon_health(page, data_dir)
    return health is not None and health.get("pid", pid) == pid


def _failed_to_start(code: int, out: Path, offset: int) -> AgentdError:
    """The daemon's own one-line reason (its last `agentd:` line), with its exit code."""
    with out.open("rb") as f:
        f.seek(offset)
        lines = [line for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    said = [line.removeprefix("agentd: ") for line in lines if line.startswith("agentd: ")]
    if said:
        error = AgentdError(said[-1])
    else:
        last = repr(lines[-1]) if lines else "nothing"
        error = AgentdError(f"agentd did not start: it exited with code {code} and said {last}; see {out}")
    error.exit_code = code if code in (1, 2) else 1
    return error

"""`agentd workers`: each agentd serving this database, whether it is alive, and the tasks it holds."""

from __future__ import annotations

from typing import Any

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json, table


def worker_rows(app: App, everyone: bool = False) -> list[dict[str, Any]]:
    """A row per worker that has not stopped (every one that registered with `everyone`), newest last."""
    from store import workers as stored

    lease_s = app.settings().lease_s
    with app.reader().reading() as conn:
        now, found, held = stored.snapshot(conn)
    tasks: dict[str, list[str]] = {}
    for lease in held:
        if lease.expires_at > now:
            tasks.setdefault(lease.worker_id, []).append(lease.task_id)
    rows = []
    for w in found:
        if w.stopped_at is not None and not everyone:
            continue
        silent_s = now - w.heartbeat_at
        if w.stopped_at is not None:
            state = "stopped"
        elif silent_s > lease_s:
            # A worker killed or cut off: its leases have run out, and other workers take its tasks.
            state = "silent"
        else:
            state = "serving"
        rows.append({
            "worker_id": w.worker_id, "host": w.host, "pid": w.pid, "state": state,
            "heartbeat_s_ago": round(max(silent_s, 0.0), 1), "tasks": tasks.get(w.worker_id, []),
            "page": w.address, "workspaces": list(w.workspaces),
        })
    return rows


def worker_line(row: dict[str, Any]) -> str:
    running = ", ".join(row["tasks"]) or "no task"
    heard = f"heard from {row['heartbeat_s_ago']} s ago"
    return f"{row['state']} on {row['host']} (pid {row['pid']}), {heard}, runs {running}"


@click.command()
@click.option("--all", "everyone", is_flag=True, help="Also list workers that have stopped.")
@json_option
@pass_app
def workers(app: App, everyone: bool, as_json: bool) -> None:
    """Each agentd serving this database: its host, pid, heartbeat and the tasks it holds leases on."""
    rows = worker_rows(app, everyone)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("(no agentd serves this database; `agentd serve` or `agentd start` runs one)")
        return
    click.echo(table(
        [(r["worker_id"], r["host"], r["pid"], r["state"], f"{r['heartbeat_s_ago']} s", ", ".join(r["tasks"]) or "-",
          r["page"] or "-") for r in rows],
        ["WORKER", "HOST", "PID", "STATE", "HEARTBEAT", "TASKS", "PAGE"],
    ))

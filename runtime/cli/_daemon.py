"""The agentd serving a data folder, as a command sees it: whether one runs, and what its page tells."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from runtime.daemon.lock import holder


def served(data_dir: Path) -> bool:
    """Whether an agentd serves `data_dir` now (it holds the instance lock); `task run` does not count."""
    return holder(data_dir) is not None


def health(page: str, data_dir: Path) -> dict | None:
    """What the daemon at `page` says of itself (its tasks, what each is deciding, pid, model), or None."""
    # Only asked of a running daemon: a command with none to ask does not pay for the HTTP client.
    import urllib.request

    from runtime.web import access

    request = urllib.request.Request(page + "healthz")
    # The page tells its tasks, pid and model only to whoever holds its token: a local command does.
    with contextlib.suppress(OSError):
        token = (data_dir / access.TOKEN_FILE).read_text().strip()
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def deciding(data_dir: Path, task_id: str) -> str | None:
    """The line the page shows for what `task_id` is doing this moment, if a serving agentd is deciding it."""
    found = holder(data_dir)
    if found is None or found[1] is None:
        return None
    said = health(found[1], data_dir) or {}
    return (said.get("deciding") or {}).get(task_id)


def unserved(data_dir: Path, task_id: str) -> str:
    """What to say of a task that no agentd will take up, with the commands that would."""
    return (
        f"no agentd serves {data_dir.resolve()}: `agentd serve` (or `agentd start`) runs this task, "
        f"or `agentd task run {task_id}` in the foreground"
    )

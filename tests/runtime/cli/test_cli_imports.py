"""What a command imports: `agentd --help` loads no command, and the read-only commands load the store but
never the model, the web server or the daemon. Each command is a fresh process, so what it imports and
does not use is paid on every call."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from runtime.cli import COMMANDS, cli

# Runs the real entry point in a fresh interpreter, then writes its exit code and every module it loaded.
PROBE = """
import json, sys
from runtime.cli import main
try:
    main(sys.argv[2:])
except SystemExit as e:
    code = e.code
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""

# What only serving, running a task, evaluating or migrating needs.
HEAVY = ("llama_cpp", "numpy", "uvicorn", "starlette", "alembic", "runtime.agent.loop", "runtime.agent.plugins",
         "runtime.inference.local", "runtime.daemon", "runtime.web", "runtime.eval")
# The instance lock's pid file is how `status` tells whether agentd runs; it imports nothing heavy.
ALLOWED = {"runtime.daemon", "runtime.daemon.lock"}


def imported_by(tmp_path: Path, *args: str) -> set[str]:
    """What the command imports on a data directory that exists: the first command in a new one
    creates the database, and migrating it is alembic's job. A command that only reads creates
    nothing, so `db upgrade` makes the database it reads."""
    out = tmp_path / "modules.json"
    subprocess.run([sys.executable, "-m", "runtime.cli", "--data-dir", str(tmp_path / "data"), "db", "upgrade"],
                   capture_output=True, check=True, timeout=120)
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(out), "--data-dir", str(tmp_path / "data"), *args],
            capture_output=True, text=True, timeout=120,
        )
    probe = json.loads(out.read_text())
    assert probe["code"] == 0, done.stderr
    return set(probe["modules"])


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules - ALLOWED if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_help_imports_no_command_and_not_the_store(tmp_path: Path) -> None:
    modules = imported_by(tmp_path, "--help")
    loaded = sorted(m for m in modules if m.split(".")[0] in ("store", "notifications", "sqlalchemy", "pydantic"))
    commands = sorted(m for m in modules if m.startswith("runtime.cli.") and m not in ("runtime.cli._app",))
    assert (loaded, commands, heavy(modules)) == ([], [], [])


@pytest.mark.parametrize("args", [("task", "list"), ("status",)], ids=" ".join)
def test_read_only_commands_import_neither_the_model_nor_the_server_nor_the_daemon(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    modules = imported_by(tmp_path, *args)
    assert "store.reader" in modules  # it did read the store
    # Reading tables needs neither the writer nor the event classes.
    assert not {"store.eventstore", "store.writer", "store.events"} & modules
    assert heavy(modules) == []


@pytest.mark.parametrize("width", [60, 80, 100])
def test_help_lists_each_command_with_the_summary_its_own_docstring_gives(width: int) -> None:
    def commands_section(format_commands) -> str:
        formatter = click.HelpFormatter(width=width)
        format_commands(click.Context(cli, info_name="agentd"), formatter)
        return formatter.getvalue()

    listed = commands_section(cli.format_commands)
    # click's own listing asks every command for its help, importing each module.
    loaded = commands_section(functools.partial(click.Group.format_commands, cli))
    assert listed == loaded
    assert sorted(cli.commands) == sorted(COMMANDS)


def test_a_mistyped_command_is_told_the_close_names(agentd) -> None:
    result = agentd("statu")
    assert result.returncode == 2
    assert "No such command 'statu'. (Did you mean one of: 'start', 'status'?)" in result.stderr

"""`agentd tool`: the tools a task may be offered, and one call of one of them by hand.

For plugin authors and for checking a tool: `agentd tool run NAME --args JSON` runs the call through
the executor a task uses (the arguments validated as they are, the tool's own authorization, its
retries, its masked observation), in a workspace (the current folder unless --workspace), and prints
the observation the model would see. A tool whose contract needs approval runs only with --yes: the
person at the terminal is the one who approves it, as on the page.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import click

from runtime.cli._app import App, json_option, pass_app
from runtime.output import echo_json, table
from store.errors import AgentdError


class ToolRunError(AgentdError):
    """The call cannot be made as asked; nothing ran."""

    exit_code = 2


@click.group()
def tool() -> None:
    """The tools tasks may be offered, and one call of one of them by hand."""


def _registry(app: App):
    from runtime.agent import plugins
    from runtime.skills.tools import register_skill_tools

    loaded = plugins.load(app.settings().plugins)
    register_skill_tools(loaded.tools)
    return loaded.tools


@tool.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """Every tool: its effects, whether it needs approval, and what it is for."""
    rows = [{"name": t.contract.name, "effects": [e.value for e in t.contract.effects] or ["none"],
             "approval": t.contract.needs_approval, "description": t.contract.description}
            for t in _registry(app).select()]
    if as_json:
        echo_json(rows)
        return
    click.echo(table([(r["name"], ",".join(r["effects"]), "yes" if r["approval"] else "", r["description"])
                      for r in rows], ["name", "effects", "approval", "description"]))


@tool.command()
@click.argument("name")
@click.option("--args", "raw", default="{}", show_default=True, help="The call's arguments, a JSON object.")
@click.option("--workspace", type=click.Path(path_type=Path, file_okay=False),
              help="The folder the call works in (default: the current folder).")
@click.option("--yes", is_flag=True, help="Approve a call whose tool needs a person's approval.")
@pass_app
def run(app: App, name: str, raw: str, workspace: Path | None, yes: bool) -> None:
    """Run one call of tool NAME and print the observation a task's model would get.

    Exit 0 when the call succeeded, 1 when it ran and failed or was refused (the observation says
    why), 2 when it could not be made (no such tool, arguments that are not JSON).
    """
    from runtime.artifacts import ArtifactStore
    from runtime.tools.contract import ToolContext
    from runtime.tools.executor import execute

    registry = _registry(app)
    if name not in registry:
        raise ToolRunError(f"no tool {name!r}; tools: {', '.join(registry.names())}")
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ToolRunError(f"--args is not JSON: {e.msg} at character {e.pos}") from None
    if not isinstance(arguments, dict):
        raise ToolRunError("--args must be a JSON object of the tool's arguments, e.g. '{\"path\": \"README.md\"}'")
    folder = (workspace or Path.cwd()).resolve()
    if not folder.is_dir():
        raise ToolRunError(f"--workspace {folder}: no such folder")
    chosen = registry.get(name)
    if chosen.contract.needs_approval and not yes:
        raise ToolRunError(f"{name} needs a person's approval: read the arguments, then pass --yes to approve")
    settings = app.settings()
    ctx = ToolContext(task_id="tool-run", tenant="default", actor=getpass.getuser(), workspace=folder,
                      artifacts=ArtifactStore(settings.artifacts_dir), protected=(settings.data_dir,))
    outcome = execute(chosen, ctx, arguments, approved=yes)
    echo_json(outcome.observation)
    if not outcome.ok:
        raise SystemExit(1)

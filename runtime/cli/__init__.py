"""The `agentd` command line: noun subcommands, one clear line and a non-zero exit on any error."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from runtime.cli._app import App

INTERNAL_ERROR = 70

# Each command's module, imported only when that command runs or shows its own help: a command pays for
# what it uses (the store, the model, the daemon), not for what its neighbours use. Next to it the first
# paragraph of its docstring, which `agentd --help` lists without importing the module;
# tests/test_cli_imports.py holds each one to its docstring.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "approvals": ("runtime.cli.approvals", "approvals", "List, approve and deny actions that wait for a person."),
    "db": ("runtime.cli.db", "db", "Migrate and check the database."),
    "eval": ("runtime.cli.eval", "eval_", "Run task sets as real tasks and report how often they succeed."),
    "events": ("runtime.cli.events", "events", "Read the event log, follow it, export it and import it."),
    "model": (
        "runtime.cli.model", "model",
        "The model agentd loads: a known model by name (`agentd model list`) or any GGUF file.",
    ),
    "notifications": (
        "runtime.cli.notifications", "notifications",
        "What was enqueued when, and which request of which task took it in.",
    ),
    "replay": (
        "runtime.cli.replay", "replay",
        "Rebuild every projection from the log into a scratch database and compare with the live one.",
    ),
    "schedule": (
        "runtime.cli.schedule", "schedule",
        "Submit tasks on a cron schedule; the schedules live in agentd's database and survive restarts.",
    ),
    "serve": ("runtime.cli.serve", "serve", "Run agentd in the foreground until Ctrl-C or SIGTERM."),
    "skills": (
        "runtime.cli.skills", "skills",
        "Agent Skills: folders with a SKILL.md whose instructions the model can load when a task needs them.",
    ),
    "start": (
        "runtime.cli.lifecycle", "start",
        "Start agentd in the background (a detached `agentd serve`) and wait until it answers.",
    ),
    "status": (
        "runtime.cli.lifecycle", "status",
        "Whether agentd runs, its tasks by phase, the notification queue's depth, and the model's state.",
    ),
    "stop": (
        "runtime.cli.lifecycle", "stop",
        "Stop the daemon gracefully: no new decisions, the current append finishes, the model is released.",
    ),
    "task": ("runtime.cli.task", "task", "Submit, list, show and cancel tasks."),
}


class _LazyGroup(click.Group):
    """The root group: a subcommand's module is imported when the subcommand is looked up to run."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            # click suggests a close name from the commands loaded so far (none, here): give it every name.
            if getattr(e, "command_name", None) is None:  # not a missing command, or a click before 8.4
                raise
            raise type(e)(e.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Stand-ins that carry only the summary, so click lays the list out as it would the real ones.
        stand_ins = [click.Command(name, help=summary) for name, (_, _, summary) in COMMANDS.items()]
        click.Group(commands=stand_ins).format_commands(ctx, formatter)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Settings file (default: ./agentd.toml if present, or $AGENTD_CONFIG).",
)
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), help="Where the database, artifacts and logs live.")
@click.version_option(package_name="agentd")
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None, data_dir: Path | None) -> None:
    """agentd: an event-sourced agent runtime for local llama.cpp models.

    Settings come from defaults < agentd.toml < AGENTD_* environment variables < flags.
    """
    app = App(config_file, data_dir)
    ctx.obj = app
    ctx.call_on_close(app.close)


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="agentd", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        code = e.exit_code
    except click.exceptions.Abort:
        click.echo("agentd: aborted", err=True)
        code = 130
    except KeyboardInterrupt:
        code = 130
    except Exception as e:  # noqa: BLE001  one line for the user, the traceback for the log
        log = _file_log()
        if _is_agentd_error(e):
            if log is not None:
                log.error("command failed", error=str(e), exc_info=True, file_only=True)
            click.echo(f"agentd: {e}", err=True)
            code = e.exit_code
        else:
            if log is not None:
                log.exception("internal error", file_only=True)
            click.echo(f"agentd: internal error: {type(e).__name__}: {e} (the traceback is in the log file)", err=True)
            code = INTERNAL_ERROR
    sys.exit(code if isinstance(code, int) else 0)


# Both looked up in sys.modules rather than imported: store.errors pulls in the whole store, and neither
# can matter to a command that never loaded it (an AgentdError exists only once store.errors does; the
# log file is set up by runtime.logs, when a command first reads the settings).
def _is_agentd_error(e: Exception) -> bool:
    errors = sys.modules.get("store.errors")
    return errors is not None and isinstance(e, errors.AgentdError)


def _file_log():
    logs = sys.modules.get("runtime.logs")
    return logs.get_logger("agentd.cli") if logs is not None and logs.configured() else None

"""The `agentd` command line: noun subcommands, one clear line and a non-zero exit on any error."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

from runtime.cli._app import App

INTERNAL_ERROR = 70

# This command's App, for main() to ask which data directory a refused write concerns.
_app: App | None = None

# Each command's module, imported only when that command runs or shows its own help: a command pays for
# what it uses (the store, the model, the daemon), not for what its neighbours use. Next to it the first
# paragraph of its docstring, which `agentd --help` lists without importing the module;
# tests/runtime/cli/test_cli_imports.py holds each one to its docstring.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "api": ("runtime.cli.api", "api", "Tokens for programs that use the HTTP API (docs/api.md), one each, revocable."),
    "approvals": ("runtime.cli.approvals", "approvals", "List, approve and deny actions that wait for a person."),
    "db": ("runtime.cli.db", "db", "Migrate and check the database."),
    "eval": ("runtime.cli.eval", "eval_", "Run task sets as real tasks and report how often they succeed."),
    "events": ("runtime.cli.events", "events", "Read the event log, follow it, export it and import it."),
    "knowledge": (
        "runtime.cli.knowledge", "knowledge",
        "The knowledge base: documents added with a tenant and scope, and what retrieval would hand a task.",
    ),
    "mcp": ("runtime.cli.mcp", "mcp", "MCP servers: their state, and their tools with hashes and effects."),
    "memory": ("runtime.cli.memory", "memory", "What agentd remembers of a subject in a tenant: add, list, forget."),
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
    "tool": ("runtime.cli.tool", "tool", "The tools tasks may be offered, and one call of one of them by hand."),
    "trace": (
        "runtime.cli.trace", "trace",
        "A task's OpenTelemetry spans, derived from the log: for any past, replayed or imported task.",
    ),
    "workers": (
        "runtime.cli.workers", "workers",
        "Each agentd serving this database: its host, pid, heartbeat and the tasks it holds leases on.",
    ),
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
# Not click's file_okay=False: a file named as the data folder is refused with the one line every source gets.
@click.option("--data-dir", type=click.Path(path_type=Path), help="Where the database, artifacts and logs live.")
@click.version_option(package_name="agentd")
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None, data_dir: Path | None) -> None:
    """agentd: an event-sourced agent runtime for local llama.cpp models.

    Settings come from defaults < agentd.toml < AGENTD_* environment variables < flags.
    """
    global _app
    app = _app = App(config_file, data_dir)
    ctx.obj = app
    ctx.call_on_close(app.close)


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="agentd", standalone_mode=False)
    except BaseExceptionGroup as group:  # a task group's failure (the daemon's): its cause matters
        code = _fail(_first_cause(group))
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001  one line for the user, the traceback for the log
        code = _fail(e)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(e: BaseException) -> int:
    """Tell the user what went wrong in one line on stderr; return the exit code that says it."""
    if isinstance(e, click.UsageError):
        # click's usage block is three lines; every bad input gets agentd's one, naming where help is.
        where = e.ctx.command_path if e.ctx is not None else "agentd"
        click.echo(f"agentd: {e.format_message()} (see `{where} --help`)", err=True)
        return e.exit_code
    if isinstance(e, click.ClickException):
        e.show()
        return e.exit_code
    if isinstance(e, click.exceptions.Abort):
        click.echo("agentd: aborted", err=True)
        return 130
    if isinstance(e, KeyboardInterrupt):
        return 130
    if isinstance(e, SystemExit):  # raised inside a task group, so it came here rather than exiting
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
        if code in (0, 1, 2, 130):
            return code
    log = _file_log()
    refused = _refusal(e)
    if refused is not None:
        # The host refused (a full or read-only disk): not agentd's fault, and the log may be on that disk.
        if log is not None:
            log.error("command failed", error=refused, exc_info=True, file_only=True)
        click.echo(f"agentd: {refused}", err=True)
        return 1
    if _is_agentd_error(e):
        if log is not None:
            log.error("command failed", error=str(e), exc_info=True, file_only=True)
        click.echo(f"agentd: {e}", err=True)
        return e.exit_code
    if log is not None:
        log.error("internal error", exc_info=True, file_only=True)
    problem = _log_problem()
    where = "the traceback is in the log file" if problem is None else f"the traceback could not be logged: {problem}"
    click.echo(f"agentd: internal error: {type(e).__name__}: {e} ({where})", err=True)
    return INTERNAL_ERROR


def _first_cause(group: BaseExceptionGroup) -> BaseException:
    """The leaf of a (nested) exception group that says what happened: an AgentdError before any other
    error, an error before an interruption, and cancellations (what the others were told) last."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for inner in e.exceptions:
                walk(inner)
        else:
            leaves.append(e)

    walk(group)
    for wanted in (_is_agentd_error, lambda e: isinstance(e, Exception), lambda e: isinstance(e, KeyboardInterrupt)):
        for leaf in leaves:
            if wanted(leaf):
                return leaf
    return leaves[0] if leaves else group


# Looked up in sys.modules rather than imported: store.errors pulls in the whole store, and neither
# can matter to a command that never loaded it (an AgentdError exists only once store.errors does; the
# log file is set up by runtime.logs, when a command first reads the settings).
def _is_agentd_error(e: BaseException) -> bool:
    errors = sys.modules.get("store.errors")
    return errors is not None and isinstance(e, errors.AgentdError)


def _file_log():
    logs = sys.modules.get("runtime.logs")
    return logs.get_logger("agentd.cli") if logs is not None and logs.configured() else None


def _log_problem() -> str | None:
    logs = sys.modules.get("runtime.logs")
    return logs.file_problem() if logs is not None else None


def _refusal(e: BaseException) -> str | None:
    """The one line for a write the host refused, or None. For a store error SQLite's words are vague,
    so the data directory (known once the settings were read) is asked too."""
    if not isinstance(e, OSError) and not _is_agentd_error(e):
        return None
    from runtime import disk

    return disk.describe(e, _app.data_dir() if _app is not None else None)

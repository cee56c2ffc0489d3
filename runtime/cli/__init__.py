"""The `agentd` command line: noun subcommands, one clear line and a non-zero exit on any error."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from runtime import logs
from runtime.cli._app import App
from runtime.cli.approvals import approvals
from runtime.cli.db import db
from runtime.cli.eval import eval_
from runtime.cli.events import events
from runtime.cli.lifecycle import start, status, stop
from runtime.cli.model import model
from runtime.cli.notifications import notifications
from runtime.cli.replay import replay
from runtime.cli.schedule import schedule
from runtime.cli.serve import serve
from runtime.cli.skills import skills
from runtime.cli.task import task
from store.errors import AgentdError

INTERNAL_ERROR = 70


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


for command in (serve, start, stop, status, task, schedule, approvals, notifications, events, replay, db, model, skills, eval_):
    cli.add_command(command)


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
    except AgentdError as e:
        if logs.configured():
            logs.get_logger("agentd.cli").error("command failed", error=str(e), exc_info=True, file_only=True)
        click.echo(f"agentd: {e}", err=True)
        code = e.exit_code
    except Exception as e:  # noqa: BLE001  a bug: one line for the user, the traceback for the log
        if logs.configured():
            logs.get_logger("agentd.cli").exception("internal error", file_only=True)
        click.echo(f"agentd: internal error: {type(e).__name__}: {e} (the traceback is in the log file)", err=True)
        code = INTERNAL_ERROR
    sys.exit(code if isinstance(code, int) else 0)

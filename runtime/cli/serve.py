"""`agentd serve`: run the daemon in the foreground."""

from __future__ import annotations

from pathlib import Path

import click

from runtime.cli._app import App, daemon_options, pass_app


@click.command()
@daemon_options
@pass_app
def serve(app: App, model: str | None, workspace: Path | None, host: str | None, port: int | None) -> None:
    """Run agentd in the foreground until Ctrl-C or SIGTERM."""
    from runtime.daemon.stop import StopRequest

    # First of all: from here on a SIGTERM is a clean stop, also while the daemon imports and loads.
    stop = StopRequest()
    stop.install()
    # Imported here, so that `agentd serve --help` does not load the daemon, the web page and the model.
    import anyio

    from runtime import logs
    from runtime.daemon import listener, service as daemon
    from runtime.daemon.lock import InstanceLock
    from runtime.daemon.wiring import open_runtime
    from runtime.web import access

    settings = app.settings(model=model, workspace=workspace, host=host, port=port)
    access.check_binding(settings.host, settings.allow_remote)
    lock = InstanceLock(settings.data_dir, shared_database=not settings.url.startswith("sqlite"))
    with lock, listener.bind(settings.host, settings.port) as sock:
        # Announced only once the port is this process's: `agentd start` trusts the address it reads.
        lock.announce(daemon.page_address(settings))
        if stop.requested:  # each step of the start takes a while: none is begun after a SIGTERM
            return _stopped_before_serving()
        store = app.store()
        # Damaged pages, or a log behind its mark: refused in db check's line before anything is written.
        store.check_sound()
        rt = open_runtime(settings, store)
        try:
            if stop.requested:
                return _stopped_before_serving()
            # From here on the daemon narrates on stderr too; before, a failure is one line from main().
            logs.configure(log_file=settings.log_file, level=settings.log_level, console=True)
            banner = (
                f"agentd is serving {settings.data_dir.resolve()}\n"
                f"  model:     {rt.model.name} (context {rt.model.n_ctx} tokens)\n"
                f"  profiles:  {', '.join(sorted(rt.profiles))}\n"
                f"  workspace: {settings.workspace.resolve()}\n"
                f"  database:  {settings.url}\n"
                f"  web page:  {daemon.login_address(settings)}\n"
                "Press Ctrl-C to stop."
            )
            # Said once the page takes connections: whoever opens the address at once gets the page.
            anyio.run(daemon.run, settings, rt, sock, stop, lambda: click.echo(banner))
        finally:
            # Release the model (and its KV states) before the instance lock goes.
            close = getattr(rt.model, "close", None)
            if close is not None:
                close()


def _stopped_before_serving() -> None:
    from runtime import logs

    # Exit 0, as a SIGTERM to a serving daemon: nothing was left half-done, and the lock is released.
    logs.get_logger("agentd.daemon").info("stopped before serving")

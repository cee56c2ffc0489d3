"""What every command shares: the settings, logging, and the store, opened once and closed at exit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from runtime.config import Settings
    from store import EventStore
    from store.reader import Reader


class App:
    def __init__(self, config_file: Path | None, data_dir: Path | None) -> None:
        self._config_file = config_file
        self._flags: dict[str, Any] = {"data_dir": data_dir}
        self._settings: Settings | None = None
        self._store: EventStore | None = None
        self._reader: Reader | None = None

    def root_options(self) -> list[str]:
        """The root options this command was given, for a child agentd to be given them too."""
        options: list[str] = []
        if self._config_file is not None:
            options += ["--config", str(Path(self._config_file).resolve())]
        if self._flags["data_dir"] is not None:
            options += ["--data-dir", str(Path(self._flags["data_dir"]).resolve())]
        return options

    def settings(self, **flags: Any) -> Settings:
        """Load the settings once; the command's own flags join the root's at the top of the precedence."""
        if self._settings is None:
            # Imported here, as the store is below: `agentd --help` and a command's own --help need neither.
            from runtime import logs
            from runtime.config import load_settings

            self._settings = load_settings(self._config_file, **self._flags, **flags)
            logs.configure(log_file=self._settings.log_file, level=self._settings.log_level, console=False)
        return self._settings

    def data_dir(self) -> Path | None:
        """The data directory, once the settings have been read."""
        return None if self._settings is None else self._settings.data_dir

    def store(self, **flags: Any) -> EventStore:
        if self._store is None:
            from store import EventStore

            s = self.settings(**flags)
            s.data_dir.mkdir(parents=True, exist_ok=True)
            self._store = EventStore(_url(s), synchronous=s.sqlite_synchronous, busy_timeout_ms=s.busy_timeout_ms)
        return self._store

    def reader(self) -> Reader | EventStore:
        """The store for a command that only reads: without the writer and the event classes where the
        database is there and current, the full store otherwise (which creates or upgrades it)."""
        if self._store is not None:
            return self._store
        if self._reader is None:
            from store.reader import Reader

            s = self.settings()
            if s.database_url is not None or s.db_path.is_file():
                self._reader = Reader.open(_url(s), busy_timeout_ms=s.busy_timeout_ms)
        return self._reader or self.store()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._store is not None:
            self._store.close()
            self._store = None


def _url(s: Settings) -> str:
    """The database's URL; on a read-only data directory, one that SQLite can read without writing.

    SQLite's WAL needs a shared-memory file beside the database, which it cannot create there. With no
    log left to fold in (the last writer checkpointed it away), the file is all there is and can be read
    as immutable; with one left, it is opened read-only and SQLite reads the log if it can.
    """
    from urllib.parse import quote

    from runtime import disk

    if s.database_url is not None or not s.db_path.is_file() or not disk.read_only(s.data_dir):
        return s.url
    wal = s.db_path.with_name(s.db_path.name + "-wal")
    immutable = "" if wal.is_file() and wal.stat().st_size > 0 else "&immutable=1"
    return f"sqlite:///file:{quote(str(s.db_path.resolve()))}?mode=ro{immutable}&uri=true"


pass_app = click.make_pass_decorator(App)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")


def _options(*options):
    """Several click options as one decorator, listed in the order --help shows them."""

    def apply(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


# serve and start take the same settings as flags: start passes them on to the serve it detaches.
daemon_options = _options(
    click.option("--model", help="A known model's name (agentd model list) or a GGUF file (default: qwen2.5-coder-0.5b)."),
    click.option("--workspace", type=click.Path(path_type=Path, file_okay=False), help="Default folder for tasks."),
    click.option("--host", help="Address of the web page (default 127.0.0.1)."),
    click.option("--port", type=int, help="Port of the web page (default 8765)."),
)


def task_options(subject: str):
    """What a submitted task is allowed, for `task submit` and for every task a schedule submits."""
    return _options(
        click.option("--profile", default="workspace", show_default=True,
                     help=f"What kind of agent runs {subject} (tools, instructions)."),
        click.option("--tenant", default="default", show_default=True, help=f"Whose data {subject} may see."),
        click.option(
            "--allow",
            "allowed",
            multiple=True,
            type=click.Choice(["write", "external"]),
            help="Offer tools with this effect too (repeatable); by default only read-only tools are offered.",
        ),
    )

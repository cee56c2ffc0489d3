"""What every command shares: the settings, logging, and the store, opened once and closed at exit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from runtime.artifacts import ArtifactStore
    from runtime.config import Settings
    from store import EventStore
    from store.reader import Reader


# The commands that start a data folder from nothing; every other one reads or changes what is there,
# and finding nothing, says where it looked instead of making an empty folder to read.
MAKERS = frozenset({
    ("task", "submit"), ("events", "import"), ("db", "upgrade"), ("schedule", "add"), ("serve",), ("start",),
    ("eval", "tasks"), ("knowledge", "add"), ("memory", "add"),
})


class App:
    def __init__(self, config_file: Path | None, data_dir: Path | None) -> None:
        self._config_file = config_file
        self._flags: dict[str, Any] = {"data_dir": data_dir}
        self._settings: Settings | None = None
        self._makes = True  # whether this command may start a data folder; known once the settings are read
        self._store: EventStore | None = None
        self._reader: Reader | None = None

    def root_options(self) -> list[str]:
        """The root options this command was given, for a child agentd to be given them too."""
        options: list[str] = []
        if self._config_file is not None:
            options += ["--config", str(Path(self._config_file).resolve())]
        if self._flags["data_dir"] is not None:
            options += ["--data-dir", str(Path(self._flags["data_dir"]).resolve())]
        elif self._settings is not None:
            from runtime.config import FOUND

            if self._settings.origin("data_dir") == FOUND:
                # The child starts in this folder and would find the same one; named, it cannot find another.
                options += ["--data-dir", str(self._settings.data_dir)]
        return options

    def settings(self, **flags: Any) -> Settings:
        """Load the settings once; the command's own flags join the root's at the top of the precedence.

        A command that starts a data folder makes it here, before anything writes into it; any other
        command logs to the folder only if it is there.
        """
        if self._settings is None:
            # Imported here, as the store is below: `agentd --help` and a command's own --help need neither.
            from runtime import data_folder, logs
            from runtime.config import FOUND, load_settings

            s = load_settings(self._config_file, **self._flags, **flags)
            command = _command()
            # Outside a command line (a test's App, say) the store is made as it always was.
            self._makes = command is None or command in MAKERS
            if s.origin("data_dir") == FOUND:
                click.echo(f"agentd: using the data folder {s.data_dir}", err=True)
            # With the database named by URL the data folder holds only artifacts, logs and scratch
            # files, and is made for any command as it always was.
            if self._makes or s.database_url is not None:
                data_folder.make(s.data_dir)
            self._settings = s
            log_file = s.log_file if s.data_dir.is_dir() else None
            logs.configure(log_file=log_file, level=s.log_level, console=False)
        return self._settings

    def data_dir(self) -> Path | None:
        """The data directory, once the settings have been read."""
        return None if self._settings is None else self._settings.data_dir

    def store(self, **flags: Any) -> EventStore:
        if self._store is None:
            from store import EventStore

            s = self.settings(**flags)
            if not self._makes:
                self._require(s)
            self._store = EventStore(_url(s), synchronous=s.sqlite_synchronous, busy_timeout_ms=s.busy_timeout_ms)
        return self._store

    def artifacts(self) -> ArtifactStore:
        """The data folder's artifact store, in front of the database's shared blobs where the database is
        a server that other hosts serve too."""
        from runtime.artifacts import ArtifactStore

        s = self.settings()
        shared = self.store().blobs if s.database_url is not None else None
        return ArtifactStore(s.artifacts_dir, s.secrets, shared)

    def reader(self) -> Reader | EventStore:
        """The store for a command that only reads: without the writer and the event classes where the
        database is there and current, the full store otherwise (which creates or upgrades it)."""
        if self._store is not None:
            return self._store
        if self._reader is None:
            from store.reader import Reader

            s = self.settings()
            if not self._makes:
                self._require(s)
            if s.database_url is not None or s.db_path.is_file():
                self._reader = Reader.open(_url(s), busy_timeout_ms=s.busy_timeout_ms)
        return self._reader or self.store()

    def _require(self, s: Settings) -> None:
        """The data folder and its database must be there for a command that does not start them."""
        from runtime import data_folder
        from runtime.config import DEFAULTS

        if s.database_url is not None:
            data_folder.require_database(s.database_url, given_by=s.origin("database_url"))
            return
        given_by = s.origin("data_dir")
        looked_from = Path.cwd() if given_by == DEFAULTS else None
        data_folder.require(s.data_dir, s.db_path, looked_from=looked_from, given_by=given_by)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._store is not None:
            self._store.close()
            self._store = None


def _command() -> tuple[str, ...] | None:
    """The running command's words after `agentd` (`("task", "list")`), or None outside a command line."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    words: list[str] = []
    while ctx.parent is not None:
        words.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return tuple(words)


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
    click.option(
        "--model", help="A known model's name (agentd model list) or a GGUF file (default: qwen2.5-coder-0.5b)."
    ),
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
            type=click.Choice(["write", "external", "memory"]),
            help="Offer tools with this effect too (repeatable); by default only read-only tools are offered.",
        ),
    )

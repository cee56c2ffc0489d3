"""What every command shares: the settings, logging, and the store, opened once and closed at exit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from runtime import logs
from runtime.config import Settings, load_settings
from store import EventStore


class App:
    def __init__(self, config_file: Path | None, data_dir: Path | None) -> None:
        self._config_file = config_file
        self._flags: dict[str, Any] = {"data_dir": data_dir}
        self._settings: Settings | None = None
        self._store: EventStore | None = None

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
            self._settings = load_settings(self._config_file, **self._flags, **flags)
            logs.configure(log_file=self._settings.log_file, level=self._settings.log_level, console=False)
        return self._settings

    def store(self, **flags: Any) -> EventStore:
        if self._store is None:
            s = self.settings(**flags)
            s.data_dir.mkdir(parents=True, exist_ok=True)
            self._store = EventStore(s.url, synchronous=s.sqlite_synchronous, busy_timeout_ms=s.busy_timeout_ms)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


pass_app = click.make_pass_decorator(App)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")

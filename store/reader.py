"""The store opened to read alone, for commands that only look (`task list`).

No writer thread and no event classes: those are most of what opening the full store costs a
command that starts, reads one table and exits. It opens only a database whose schema is this
agentd's; anything else (a new data directory, a schema to upgrade) is the full store's to handle.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from sqlalchemy import Connection

from store import migrate
from store.database import Engines, create_engines, translating


class Reader:
    def __init__(self, url: str, engines: Engines) -> None:
        self.url = url
        self.engines = engines

    @classmethod
    def open(cls, url: str, *, busy_timeout_ms: int = 5000) -> Reader | None:
        """A reader, or None where the schema is missing or not this agentd's head."""
        engines = create_engines(url, busy_timeout_ms=busy_timeout_ms)
        try:
            with translating(url), engines.read.connect() as conn:
                current = migrate.current_revision(conn) == migrate.head_revision()
        except BaseException:
            engines.dispose()
            raise
        if not current:
            engines.dispose()
            return None
        return cls(url, engines)

    def reading(self):
        return reading(self.url, self.engines)

    def close(self) -> None:
        self.engines.dispose()


@contextlib.contextmanager
def reading(url: str, engines: Engines) -> Iterator[Connection]:
    """A read connection in one transaction: every query in the block sees the same snapshot."""
    with translating(url):
        with engines.read.connect() as conn, conn.begin():
            yield conn

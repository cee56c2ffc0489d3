"""Wake-ups on PostgreSQL: a commit to the log NOTIFYs, and a worker that LISTENs looks at once.

The tables stay the truth. A wake-up says only "something was committed, look now"; a worker that
misses one (a dropped connection, a busy moment) finds the same rows at its next poll, a little later.
SQLite has nothing to listen to: one host, whose scheduler polls.
"""

from __future__ import annotations

from sqlalchemy.engine import make_url

from store.errors import StoreError

# One channel for the database: every commit to the log, whoever made it.
CHANNEL = "agentd_log"


def notify_sql() -> str:
    """The statement an append transaction runs: sent at its commit, dropped with its rollback, and
    sent once however often a transaction runs it."""
    return f"NOTIFY {CHANNEL}"


class LogWakeups:
    """A connection of its own that LISTENs for commits to the log."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._error = psycopg.Error
        # libpq takes the SQLAlchemy URL without its driver name; the query (a search_path) stays.
        conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        try:
            self._conn = psycopg.connect(conninfo, autocommit=True)
            self._conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as e:
            raise StoreError(f"cannot listen for commits to the log: {e}") from e

    def wait(self, timeout_s: float) -> bool:
        """Whether a commit was announced within `timeout_s` (all announced meanwhile are taken too)."""
        found = False
        try:
            for _ in self._conn.notifies(timeout=timeout_s, stop_after=1):
                found = True
        except self._error as e:
            raise StoreError(f"lost the connection listening for commits to the log: {e}") from e
        return found

    def close(self) -> None:
        if hasattr(self, "_conn"):
            self._conn.close()

    def __enter__(self) -> LogWakeups:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

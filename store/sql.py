"""Portable statements compiled once per dialect and run on the driver's cursor.

SQLAlchemy Core builds the statements, so they stay portable between SQLite and PostgreSQL. Building
and compiling a Core statement costs more than executing it, though, so the write path compiles each
one once per dialect and hands the text straight to the driver.
"""

from __future__ import annotations

import contextlib
from itertools import chain
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator, Sequence

from sqlalchemy import Connection, Table
from sqlalchemy.sql import ClauseElement

from store.wakeup import notify_sql


class Statement:
    __slots__ = ("element", "_compiled", "_reorder")

    def __init__(self, element: ClauseElement) -> None:
        self.element = element
        self._compiled: dict[str, tuple[str, tuple[str, ...] | None, dict[str, Any]]] = {}
        # (dialect, columns) -> a C-level getter putting a row in the driver's parameter order
        self._reorder: dict[tuple[str, tuple[str, ...]], Callable[[tuple], tuple]] = {}

    def compiled(self, conn: Connection) -> tuple[str, tuple[str, ...] | None, dict[str, Any]]:
        """(SQL text, parameter order for positional drivers or None for named ones, default values)."""
        name = conn.dialect.name
        found = self._compiled.get(name)
        if found is None:
            # Expanding IN lists are rendered now, with their values as parameters.
            c = self.element.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
            order = tuple(c.positiontup) if c.positional else None
            defaults = {k: v for k, v in c.params.items() if v is not None}
            found = self._compiled[name] = (str(c), order, defaults)
        return found

    def _params(self, conn: Connection, values: dict[str, Any]) -> tuple[str, Any]:
        text, order, defaults = self.compiled(conn)
        merged = {**defaults, **values} if defaults else values
        return text, (tuple(merged[k] for k in order) if order is not None else merged)

    def execute(self, conn: Connection, values: dict[str, Any] | None = None):
        text, params = self._params(conn, values or {})
        cur = _cursor(conn)
        cur.execute(text, params)
        return cur

    def executemany(self, conn: Connection, rows: Iterable[dict[str, Any]]) -> None:
        text, order, defaults = self.compiled(conn)
        if order is not None:
            params: Sequence[Any] = [tuple({**defaults, **r}[k] if defaults else r[k] for k in order) for r in rows]
        else:
            params = [{**defaults, **r} for r in rows]
        _cursor(conn).executemany(text, params)

    def executemany_tuples(self, conn: Connection, columns: Sequence[str], rows: list[tuple]) -> None:
        """Rows already in `columns` order: no per-row dict when the driver is positional in that order."""
        text, order, _ = self.compiled(conn)
        if order is not None and tuple(order) == tuple(columns):
            _cursor(conn).executemany(text, rows)
        elif order is not None:
            # Found once per statement and column list: the update of a task row runs on every append.
            key = (conn.dialect.name, tuple(columns))
            reorder = self._reorder.get(key)
            if reorder is None:
                index = [list(columns).index(k) for k in order]
                reorder = self._reorder[key] = itemgetter(*index) if len(index) > 1 else lambda r: (r[index[0]],)
            _cursor(conn).executemany(text, list(map(reorder, rows)))
        else:
            _cursor(conn).executemany(text, [dict(zip(columns, r, strict=True)) for r in rows])

    def scalar(self, conn: Connection, values: dict[str, Any] | None = None) -> Any:
        row = self.execute(conn, values).fetchone()
        return None if row is None else row[0]


def cursor(conn: Connection):
    """A cursor of the driver connection SQLAlchemy holds, in whatever transaction is open on it."""
    return conn.connection.dbapi_connection.cursor()


_cursor = cursor


# The advisory lock key of the append path on PostgreSQL: any fixed 64-bit number no other part of
# agentd uses ("agentd" in ASCII).
APPEND_LOCK = 0x6167656E7464


@contextlib.contextmanager
def write_transaction(conn: Connection) -> Iterator[None]:
    """One write transaction for the append path.

    On SQLite it is driven on the driver connection itself: SQLAlchemy's begin and commit, with the
    event listener that issues BEGIN IMMEDIATE, cost about 50 us per commit, a sixth of a durable
    single append. Other backends use SQLAlchemy's transaction as usual.
    """
    if conn.dialect.name != "sqlite":
        with conn.begin():
            if conn.dialect.name == "postgresql":
                # Every writer of every process and host takes this lock first and holds it until its
                # commit: seqs are then taken from the committed head, one transaction after another,
                # so the log stays gapless, its chain unbroken, and a reader following `seq > cursor`
                # can never see a seq before the ones below it have committed. SQLite's BEGIN IMMEDIATE
                # does the same for one file.
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({APPEND_LOCK})")
                # Other workers hear of the commit at once (store/wakeup.py) instead of at their next poll.
                conn.exec_driver_sql(notify_sql())
            yield
        return
    raw = conn.connection.dbapi_connection
    raw.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        # SQLite rolls back by itself after some errors (a full disk, say); a second ROLLBACK would
        # then fail and hide the error that matters.
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    raw.execute("COMMIT")


class RowInsert:
    """Inserting many rows of one table, given as tuples in the table's column order.

    Where the driver binds positionally (SQLite), rows go in groups through one multi-row
    `VALUES (...), (...)`: a fifth cheaper per row than executemany, which binds and steps the
    statement once per row. Elsewhere executemany, which drivers such as psycopg pipeline themselves.
    """

    ROWS_PER_STATEMENT = 100

    def __init__(self, table: Table) -> None:
        self.columns = tuple(c.name for c in table.columns)
        self._single = Statement(table.insert())
        self._multi: dict[str, str] = {}

    def insert(self, conn: Connection, rows: Sequence[tuple]) -> None:
        text, order, _ = self._single.compiled(conn)
        if conn.dialect.paramstyle != "qmark" or order != self.columns:
            self._single.executemany_tuples(conn, self.columns, list(rows))
            return
        cur = _cursor(conn)
        n = self.ROWS_PER_STATEMENT
        whole = len(rows) - len(rows) % n
        if whole:
            multi = self._multi.get(conn.dialect.name)
            if multi is None:
                head, _, group = text.partition(" VALUES ")
                multi = self._multi[conn.dialect.name] = f"{head} VALUES {', '.join([group] * n)}"
            for i in range(0, whole, n):
                cur.execute(multi, list(chain.from_iterable(rows[i : i + n])))
        if whole < len(rows):
            cur.executemany(text, rows[whole:])

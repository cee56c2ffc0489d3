"""The vault's reads and writes: each task's secrets by number, encrypted by the caller before they get here.

The store knows neither what a secret looks like nor the key: it keeps what it is given (a number, the
keyed digest that names a value, its kind, the ciphertext) and hands it back. No event refers to a row
by anything but the number in a placeholder, so nothing here is replayed, and an export carries it
only when asked (`events export --vault`, runtime/secrets/bundle.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import Connection, func, insert, select

from store.errors import StoreError
from store.tables import secrets
from store.writer import now_iso


class Kept(NamedTuple):
    number: int
    digest: str
    kind: str
    sealed: str


class New(NamedTuple):
    digest: str
    kind: str
    sealed: str


def of_task(conn: Connection, task_id: str) -> list[Kept]:
    rows = conn.execute(
        select(secrets.c.number, secrets.c.digest, secrets.c.kind, secrets.c.sealed)
        .where(secrets.c.task_id == task_id)
        .order_by(secrets.c.number)
    )
    return [Kept(*row) for row in rows]


def keep(conn: Connection, task_id: str, new: Sequence[New]) -> list[Kept]:
    """Give each value not kept for the task yet the next number, in order; run in a write transaction, so
    two processes that find the same value at once agree on its number. Returns all the task's secrets."""
    known = {row.digest for row in of_task(conn, task_id)}
    last = conn.execute(
        select(func.coalesce(func.max(secrets.c.number), 0)).where(secrets.c.task_id == task_id)
    ).scalar_one()
    now = now_iso()
    rows = []
    for item in new:
        if item.digest in known:
            continue
        known.add(item.digest)
        last += 1
        rows.append({"task_id": task_id, "number": last, "digest": item.digest, "kind": item.kind,
                     "sealed": item.sealed, "recorded_at": now})
    if rows:
        conn.execute(insert(secrets), rows)
    return of_task(conn, task_id)


class Held(NamedTuple):
    task_id: str
    number: int
    kind: str
    sealed: str


def every(conn: Connection) -> list[Held]:
    """Every task's secrets, by task and number."""
    rows = conn.execute(
        select(secrets.c.task_id, secrets.c.number, secrets.c.kind, secrets.c.sealed)
        .order_by(secrets.c.task_id, secrets.c.number)
    )
    return [Held(*row) for row in rows]


def put(conn: Connection, rows: Sequence[tuple[Held, str]]) -> int:
    """Put each secret (with its digest under this vault's key) in an empty vault under the number its
    task's placeholders show: the vault of an imported log. In the caller's transaction."""
    if count(conn) != 0:
        raise StoreError("this data folder's vault already holds secrets; import a vault into a new data folder")
    now = now_iso()
    if rows:
        conn.execute(insert(secrets), [
            {"task_id": held.task_id, "number": held.number, "digest": digest, "kind": held.kind,
             "sealed": held.sealed, "recorded_at": now}
            for held, digest in rows
        ])
    return len(rows)


def count(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(secrets)).scalar_one()

"""Applying the shipped migrations from code, and refusing a database written by a newer agentd."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

from store.database import Engines, translating
from store.errors import SchemaTooNew, StoreError

if TYPE_CHECKING:
    from alembic.config import Config

SCRIPT_LOCATION = "store:migrations"
VERSIONS = Path(__file__).parent / "migrations" / "versions"
# Alembic's own bookkeeping table: one row holding the revision the schema is at.
VERSION_TABLE = "alembic_version"


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@functools.cache
def revisions() -> dict[str, str | None]:
    """revision -> down_revision of every shipped migration, read from the files' assignments.

    Every command checks the schema before it reads; importing alembic to do so would cost a read-only
    command a tenth of its time (tests/store/test_migrations.py holds this to alembic's own reading).
    """
    found: dict[str, str | None] = {}
    for path in sorted(VERSIONS.glob("*.py")):
        values = {}
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if node.targets[0].id in ("revision", "down_revision"):
                    values[node.targets[0].id] = ast.literal_eval(node.value)
        if "revision" in values:
            found[values["revision"]] = values.get("down_revision")
    return found


def head_revision() -> str:
    """The one revision no other migration follows."""
    known = revisions()
    heads = set(known) - set(known.values())
    assert len(heads) == 1, f"the shipped migrations have {len(heads)} heads: {sorted(heads)}"
    return heads.pop()


def current_revision(connection: Connection) -> str | None:
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(rows) > 1:
        raise StoreError(
            f"the database records {len(rows)} schema revisions at once ({rows}); it was not made by agentd"
        )
    return rows[0] if rows else None


def check_not_newer(revision: str | None) -> None:
    if revision is None:
        return
    if revision not in revisions():
        raise SchemaTooNew(
            f"the database is at schema revision {revision!r}, written by a newer agentd "
            f"(this one knows up to {head_revision()!r}); upgrade agentd instead"
        )


def upgrade(engines: Engines) -> str:
    """Bring the schema to this agentd's head; return the revision it is at now."""
    url = engines.url
    with translating(url):
        # Looked at through a read connection first: an up-to-date database (the usual case) must not
        # make a read-only command wait for another process's write lock.
        with engines.read.connect() as conn:
            revision = current_revision(conn)
            check_not_newer(revision)
            if revision == head_revision():
                return revision
        with engines.write.begin() as conn:
            # Checked again under the write lock: another process may have migrated meanwhile.
            check_not_newer(current_revision(conn))
            from alembic import command

            command.upgrade(alembic_config(conn), "head")
            return current_revision(conn) or ""


def require_current(engines: Engines) -> None:
    """Refuse a database that is missing, behind, or ahead of this agentd, without writing to it."""
    with translating(engines.url):
        with engines.read.connect() as conn:
            revision = current_revision(conn)
    check_not_newer(revision)
    if revision != head_revision():
        raise StoreError(f"the database schema is at {revision!r}, not {head_revision()!r}; run `agentd db upgrade`")

"""Applying the shipped migrations from code, and refusing a database written by a newer agentd."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from store.database import Engines, translating
from store.errors import SchemaTooNew, StoreError

SCRIPT_LOCATION = "store:migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def check_not_newer(revision: str | None) -> None:
    if revision is None:
        return
    known = {rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if revision not in known:
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

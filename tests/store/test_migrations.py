"""Migrations: from a blank database they produce exactly the models' schema; a newer database is refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from store import EventStore, SchemaTooNew
from store.migrate import alembic_config, current_revision, head_revision, revisions
from store.tables import metadata
from tests.helpers import REPO


def test_migrations_from_a_blank_database_produce_exactly_the_models_schema(db_url: str) -> None:
    EventStore(db_url).close()
    engine = create_engine(db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), metadata)
        assert diff == []
        assert MigrationContext.configure(conn).get_current_revision() == head_revision()
        triggers = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        clustered = {
            r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE sql LIKE '%WITHOUT ROWID%'")
        }
    # compare_metadata does not look at table options; the clustered lists must be created as such.
    assert clustered == {t.name for t in metadata.sorted_tables if t.dialect_options["sqlite"]["with_rowid"] is False}
    assert clustered == {"task_actions", "artifacts", "notification_targets", "tool_calls"}
    assert triggers == {"events_no_update", "events_no_delete"}
    assert set(inspect(engine).get_table_names()) == {*metadata.tables, "alembic_version"}


def test_the_revisions_read_without_alembic_are_alembics_own(db_url: str) -> None:
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    assert revisions() == {r.revision: r.down_revision for r in scripts.walk_revisions()}
    assert head_revision() == scripts.get_current_head()
    engine = create_engine(db_url)
    with engine.connect() as conn:
        assert current_revision(conn) is None
    EventStore(db_url).close()
    with engine.connect() as conn:
        assert current_revision(conn) == MigrationContext.configure(conn).get_current_revision() == head_revision()


def test_opening_an_up_to_date_database_runs_no_migration(db_url: str, data_dir: Path) -> None:
    EventStore(db_url).close()
    before = hashlib.sha256((data_dir / "agentd.db").read_bytes()).hexdigest()
    EventStore(db_url).close()
    assert hashlib.sha256((data_dir / "agentd.db").read_bytes()).hexdigest() == before


def test_a_database_written_by_a_newer_agentd_is_refused_and_left_alone(db_url: str, data_dir: Path) -> None:
    EventStore(db_url).close()
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    engine.dispose()
    before = (data_dir / "agentd.db").read_bytes()
    with pytest.raises(SchemaTooNew, match="9999_from_the_future.*newer agentd"):
        EventStore(db_url)
    assert (data_dir / "agentd.db").read_bytes() == before


def test_alembic_ini_points_at_the_shipped_migrations() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    ini = REPO / "alembic.ini"
    assert ScriptDirectory.from_config(Config(str(ini))).get_current_head() == head_revision()

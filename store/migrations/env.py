"""Alembic environment: runs on the connection agentd hands it, or on the URL in alembic.ini."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from store.tables import metadata

config = context.config
target_metadata = metadata


def run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:
    engine = engine_from_config(config.get_section(config.config_ini_section, {}), poolclass=pool.NullPool)
    with engine.connect() as conn:
        run(conn)

"""The local PostgreSQL the scale-out tests run on, and a fresh schema per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

SERVER = os.environ.get("AGENTD_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def unreachable() -> str | None:
    """Why the PostgreSQL tests cannot run here, or None when they can. Where they must run (CI sets
    REQUIRE_POSTGRES), a server out of reach fails the run instead of skipping its tests."""
    why = _why_unreachable()
    if why is not None and os.environ.get("REQUIRE_POSTGRES"):
        raise RuntimeError(f"the PostgreSQL tests must run here, and cannot: {why}")
    return why


def _why_unreachable() -> str | None:
    try:
        import psycopg  # noqa: F401  only whether it imports
    except ImportError:
        return "psycopg is not installed"
    from sqlalchemy import create_engine

    try:
        create_engine(SERVER).connect().close()
    except Exception as e:  # noqa: BLE001  any failure to connect means: no server to test against
        return f"no PostgreSQL at {SERVER}: {type(e).__name__}"
    return None


def fresh_schema() -> Iterator[str]:
    """A URL whose connections see only a new schema, dropped afterwards (a fixture's body)."""
    from sqlalchemy import create_engine

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(SERVER, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield f"{SERVER}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()

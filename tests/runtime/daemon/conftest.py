"""Fixtures of the daemon tests that run several agentd on one PostgreSQL database."""

from __future__ import annotations

import pytest


@pytest.fixture
def pg_url():
    """A URL whose connections see only a new schema, dropped afterwards; skipped where PostgreSQL is out
    of reach (and failed instead where it must run, REQUIRE_POSTGRES)."""
    from tests.helpers.postgres import fresh_schema, unreachable

    why = unreachable()
    if why is not None:
        pytest.skip(why)
    yield from fresh_schema()

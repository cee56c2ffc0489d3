"""How long a memory of each purpose is kept when its writer names no expiry: `memory_retention_days`.

There is no default number of days: a purpose the config does not name keeps no expiry of its own, and
retention is a product and legal decision made per purpose, not a constant in code.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta


def default_expiry(purpose: str, now: datetime, retention: Mapping[str, int]) -> datetime | None:
    """When a memory of `purpose` recorded at `now` expires by the config, or None when it says nothing."""
    days = retention.get(purpose)
    return None if days is None else now + timedelta(days=days)

"""Identifiers: time-ordered event ids and short task ids."""

from __future__ import annotations

import os
import secrets
import time

_VARIANT = "89ab"


def uuid7s(n: int) -> list[str]:
    """`n` version-7 UUIDs (RFC 9562) as strings.

    Time-ordered, so the unique index on event ids grows at its end as seq does. Made in bulk because a
    batched append needs hundreds at a time and `uuid.UUID` costs more per id than the insert does.
    """
    ms = f"{time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF:012x}"
    head = f"{ms[:8]}-{ms[8:]}-7"
    rand = os.urandom(10 * n).hex()
    out = []
    for i in range(0, 20 * n, 20):
        r = rand[i : i + 20]
        out.append(f"{head}{r[:3]}-{_VARIANT[int(r[18], 16) & 3]}{r[3:6]}-{r[6:18]}")
    return out


def uuid7() -> str:
    return uuid7s(1)[0]


def new_task_id() -> str:
    """Short enough to type, random enough never to collide in one store (a collision is a conflict anyway)."""
    return "t-" + secrets.token_hex(5)

"""Identifiers people type: short random task ids."""

from __future__ import annotations

import secrets


def new_task_id() -> str:
    """Short enough to type, random enough never to collide in one store (a collision is a conflict anyway)."""
    return "t-" + secrets.token_hex(5)

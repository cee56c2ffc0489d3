"""Events of scoped memory: a memory recorded for one subject, tenant and purpose, and forgotten."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

from pydantic import Field, field_validator

from store.events._base import Event

MEMORY_STREAM = "memory"

# Where a memory came from. Only the first two are facts; what a model inferred is a hypothesis, and a
# source not named here never loads.
MemorySource = Literal["user_stated", "system_record", "model_inferred"]
MEMORY_SOURCES: tuple[str, ...] = get_args(MemorySource)


class MemoryRecorded(Event):
    """A memory that passed the write checks, its text already redacted: nothing unredacted is ever logged."""

    memory_id: str = Field(pattern=r"^m-[0-9a-f]{10}$")
    subject: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    purpose: str = Field(min_length=1)
    text: str = Field(min_length=1)
    source: MemorySource
    # ISO 8601 with an offset: compared with a clock at every load, so never a naive local time.
    expires_at: str | None = None
    review_at: str | None = None

    @field_validator("expires_at", "review_at")
    @classmethod
    def _aware(cls, value: str | None) -> str | None:
        if value is not None and datetime.fromisoformat(value).tzinfo is None:
            raise ValueError("an ISO 8601 datetime with a UTC offset")
        return value


class MemoryForgotten(Event):
    """A memory's tombstone: from here on its text loads nowhere, and a replay keeps it that way."""

    memory_id: str = Field(pattern=r"^m-[0-9a-f]{10}$")
    reason: str = ""

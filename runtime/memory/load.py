"""Which memories a decision may see: the four checks, in their order, and why each other one stays out.

1. this subject and tenant; 2. a purpose relevant to this decision; 3. not expired, nor due for review;
4. a known source. The order matters: a memory of another tenant is refused for its scope before
anything else about it is looked at, so nothing else of it is ever weighed or said.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from runtime.memory.dates import utc
from runtime.memory.record import Memory
from store.events import MEMORY_SOURCES

Check = Literal["scope", "purpose", "expired", "source"]
CHECKS: tuple[Check, ...] = ("scope", "purpose", "expired", "source")

# Loaded, but only as what a model once inferred: a request labels these as hypotheses, never as facts.
INFERRED = "model_inferred"


@dataclass(frozen=True)
class Refusal:
    memory_id: str
    check: Check
    why: str


@dataclass(frozen=True)
class Loaded:
    """What one decision may see of memory: facts, hypotheses, and every memory refused, by which check."""

    facts: tuple[Memory, ...] = ()
    hypotheses: tuple[Memory, ...] = ()
    refused: tuple[Refusal, ...] = ()

    @property
    def left_out(self) -> tuple[Refusal, ...]:
        """The refusals a request's manifest may list. A memory of another subject or tenant is left out
        of that too: a task must not learn that it exists, let alone its id."""
        return tuple(r for r in self.refused if r.check != "scope")


def load(
    memories: Mapping[str, Memory] | Iterable[Memory],
    *,
    subject: str,
    tenant: str,
    purposes: str | Collection[str],
    now: datetime,
    known_sources: str | Collection[str] = MEMORY_SOURCES,
) -> Loaded:
    """The memories of `subject` in `tenant` that serve one of `purposes` and are current at `now`.

    Pure: the caller folds the log (`record.memories`) and says what time it is, so a replay loads
    the same memories a decision once did. A forgotten memory is not a candidate at all.
    """
    now = utc(now)
    purposes, known_sources = _names(purposes), _names(known_sources)
    facts: list[Memory] = []
    hypotheses: list[Memory] = []
    refused: list[Refusal] = []
    for m in memories.values() if isinstance(memories, Mapping) else memories:
        if m.forgotten:
            continue
        refusal = _refusal(m, subject, tenant, purposes, now, known_sources)
        if refusal is not None:
            refused.append(refusal)
        elif m.source == INFERRED:
            hypotheses.append(m)
        else:
            facts.append(m)
    return Loaded(tuple(facts), tuple(hypotheses), tuple(refused))


def _refusal(
    m: Memory, subject: str, tenant: str, purposes: Collection[str], now: datetime, known_sources: Collection[str]
) -> Refusal | None:
    """The first of the four checks `m` fails, or None when it may load."""
    if (m.subject, m.tenant) != (subject, tenant):
        # Not which subject or tenant it is: this refusal is about someone this decision is not for.
        return Refusal(m.memory_id, "scope", "another subject or tenant")
    if m.purpose not in purposes:
        return Refusal(m.memory_id, "purpose", f"purpose {m.purpose!r} is not relevant to this decision")
    if m.expires_at is not None and m.expires_at <= now:
        return Refusal(m.memory_id, "expired", f"expired at {m.expires_at.isoformat()}")
    if m.review_at is not None and m.review_at <= now:
        # Past its review date nobody has vouched for it since: as stale as an expired one.
        return Refusal(m.memory_id, "expired", f"due for review since {m.review_at.isoformat()}")
    if m.source not in known_sources:
        return Refusal(m.memory_id, "source", f"source {m.source!r} is not a known one")
    return None


def _names(names: str | Collection[str]) -> frozenset[str]:
    # One name given bare is one name: as a string, `in` would pass any part of it ("sup" in "support").
    return frozenset((names,) if isinstance(names, str) else names)

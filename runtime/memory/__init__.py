"""Scoped memory: what agentd remembers about a subject in a tenant, for a purpose, with its provenance.

Recorded and forgotten as events in the `memory` stream; folded by `memories` (and into the store's
`memories` table, read back by `from_rows`), checked by `propose`, and handed to a decision only through
`load`, which applies the four checks in their order.
"""

from runtime.memory.load import CHECKS, Loaded, Refusal, load
from runtime.memory.record import Memory, from_rows, memories
from runtime.memory.redact import PATTERNS, Pattern, Redacted, redact
from runtime.memory.write import forget, forgotten, propose, recorded

__all__ = [
    "CHECKS",
    "PATTERNS",
    "Loaded",
    "Memory",
    "Pattern",
    "Redacted",
    "Refusal",
    "forget",
    "forgotten",
    "from_rows",
    "load",
    "memories",
    "propose",
    "recorded",
    "redact",
]

"""Canonical JSON: one spelling of a value, the same bytes in every process.

What is hashed (an approval's arguments) or repeated in every request (tool definitions, which
llama.cpp can reuse only if the bytes are identical) is written this way and no other.
"""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any, *, ascii_only: bool = True) -> str:
    """Sorted keys, no spaces. `ascii_only` escapes non-ASCII characters; hashes and prompts recorded
    so far were made that way, so it stays the default."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only)

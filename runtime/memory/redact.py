"""Secrets and personal data taken out of a memory's text before it is recorded, by kind.

The patterns are runtime.secrets.patterns', the one set the vault and the logs use too. What matched is
replaced by `[redacted:KIND]`; the value is not kept anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from runtime.secrets.patterns import CUSTOM, PATTERNS, Pattern, as_pattern, redacted

__all__ = ["CUSTOM", "PATTERNS", "Pattern", "Redacted", "redact"]


class Redacted(NamedTuple):
    text: str
    kinds: tuple[str, ...] = ()  # each kind found, once, in the order first found


def redact(text: str, extra: Iterable[str | re.Pattern[str] | Pattern] = ()) -> Redacted:
    """`text` with every secret and piece of personal data replaced, and the kinds that were found.

    `extra` adds patterns after the built-in ones: a regex (string or compiled) is of kind "custom".
    """
    text, kinds = redacted(text, (*PATTERNS, *(as_pattern(p) for p in extra)))
    return Redacted(text, kinds)

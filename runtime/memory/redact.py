"""Secrets and personal data taken out of a memory's text before it is recorded, by kind.

Every pattern lives here, in the order they are tried: a private key block before the tokens inside
it, a labelled value (`password: X`) before the shapes a bare token has. A caller adds its own patterns
rather than editing these. What matched is replaced by `[redacted:KIND]`; the value is not kept anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

CUSTOM = "custom"


@dataclass(frozen=True)
class Pattern:
    """One kind of secret or personal data. Where the regex has a group named `value`, only that group is
    replaced, so the label before it ("password:") stays and the memory still reads."""

    kind: str
    regex: re.Pattern[str]


class Redacted(NamedTuple):
    text: str
    kinds: tuple[str, ...] = ()  # each kind found, once, in the order first found


# A value after a label, quoted or up to the next blank.
_VALUE = r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;]+)"""

PATTERNS: tuple[Pattern, ...] = (
    # A block cut short (pasted halfway) is still a key: up to the end when no END line follows.
    Pattern("private_key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
        re.DOTALL,
    )),
    Pattern("password", re.compile(
        r"(?i)\b(?:pass(?:word|wd|phrase)?|pwd)\b(?:\s*[:=]\s*|\s+is\s+)" + _VALUE
    )),
    # Tokens whose issuer gives them a recognisable prefix: OpenAI and Stripe style `sk-` / `sk_live_`,
    # GitHub, AWS access key ids, Slack, Google API keys, JWTs, and agentd's own API tokens.
    Pattern("api_key", re.compile(
        r"\b(?:"
        r"sk-(?:live-|test-|proj-|ant-)?[A-Za-z0-9_-]{8,}"
        r"|[spr]k_(?:live|test)_[A-Za-z0-9]{8,}"
        r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
        r"|xox[abeprs]-[A-Za-z0-9-]{10,}"
        r"|AIza[0-9A-Za-z_-]{35}"
        r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
        r"|agentd_[A-Za-z0-9_-]{20,}"
        r")"
    )),
    # A long hex or base64 run after a word that says it is a secret; it must hold a digit, so that a long
    # word after "token" ("token authentication") stays.
    Pattern("secret", re.compile(
        r"(?i)\b(?:api[_ -]?key|access[_ -]?key|secret(?:[_ -]?key)?|token|key|bearer|credentials?)\b"
        r"(?:\s*[:=]\s*|\s+is\s+|\s+)"
        r"(?P<value>(?=[A-Za-z0-9+/_=-]*\d)[A-Za-z0-9+/_-]{16,}={0,2})"
    )),
    Pattern("email", re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")),
    # Digits in groups, as phone numbers are written; _phone() then asks for enough digits and no date.
    Pattern("phone", re.compile(r"(?<![\w+])(?:\+|00)?\(?\d[\d ().-]{5,}\d(?![\w])")),
)

# 2026-10-02 or 2026-10-02 10:30: digits in groups that are a date, not a number to call.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}")


def redact(text: str, extra: Iterable[str | re.Pattern[str] | Pattern] = ()) -> Redacted:
    """`text` with every secret and piece of personal data replaced, and the kinds that were found.

    `extra` adds patterns after the built-in ones: a regex (string or compiled) is of kind "custom".
    """
    kinds: list[str] = []

    def replace(match: re.Match[str], pattern: Pattern) -> str:
        if pattern.kind == "phone" and not _phone(match.group(0)):
            return match.group(0)
        if pattern.kind not in kinds:
            kinds.append(pattern.kind)
        placeholder = f"[redacted:{pattern.kind}]"
        if "value" not in pattern.regex.groupindex or match.group("value") is None:
            return placeholder
        # Only the value: the label before it, and anything the match took after it, stay.
        start, end = (i - match.start() for i in match.span("value"))
        return match.group(0)[:start] + placeholder + match.group(0)[end:]

    for pattern in (*PATTERNS, *(_pattern(p) for p in extra)):
        text = pattern.regex.sub(lambda match, p=pattern: replace(match, p), text)
    return Redacted(text, tuple(kinds))


def _phone(candidate: str) -> bool:
    digits = sum(c.isdigit() for c in candidate)
    if _DATE.search(candidate):
        return False
    international = candidate.startswith(("+", "00"))
    return (7 if international else 9) <= digits <= 15


def _pattern(p: str | re.Pattern[str] | Pattern) -> Pattern:
    if isinstance(p, Pattern):
        return p
    return Pattern(CUSTOM, re.compile(p) if isinstance(p, str) else p)

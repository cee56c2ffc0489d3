"""The one set of patterns for secrets and personal data: what the vault, memory and the logs look for.

Every pattern lives here, in the order they are tried: a private key block before the tokens inside
it, a labelled value (`password: X`) before the shapes a bare token has. A caller adds its own patterns
(the `secret_patterns` setting) rather than editing these. The kinds in SECRET_KINDS are secrets, which
a task keeps in its vault under a placeholder; email addresses and phone numbers are personal data,
which memory redacts and a task's log keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from runtime.errors import ConfigError

CUSTOM = "custom"


@dataclass(frozen=True)
class Pattern:
    """One kind of secret or personal data. Where the regex has a group named `value`, only that group is
    the secret, so the label before it ("password:") stays and the text still reads."""

    kind: str
    regex: re.Pattern[str]


# A value after a label, quoted or up to the next blank. Never a placeholder agentd wrote itself: a
# password already hidden as "password: [secret:1]" is not a second secret.
_VALUE = r"""(?P<value>(?!\[(?:secret|redacted):)(?:"[^"\n]*"|'[^'\n]*'|[^\s"',;]+))"""

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

SECRET_KINDS = frozenset({"private_key", "password", "api_key", "secret", CUSTOM})
SECRETS: tuple[Pattern, ...] = tuple(p for p in PATTERNS if p.kind in SECRET_KINDS)

# 2026-10-02 or 2026-10-02 10:30: digits in groups that are a date, not a number to call.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}")


def compiled(sources: Iterable[str], setting: str = "secret_patterns") -> tuple[Pattern, ...]:
    """The patterns a setting names, each of kind "custom"; a regex that does not compile, or that matches
    the empty text (it would hide everything and nothing), is a ConfigError naming it."""
    out = []
    for source in sources:
        try:
            regex = re.compile(source)
        except re.error as e:
            raise ConfigError(f"{setting}: {source!r} is not a regular expression ({e})") from None
        if regex.fullmatch(""):
            raise ConfigError(f"{setting}: {source!r} matches empty text")
        out.append(Pattern(CUSTOM, regex))
    return tuple(out)


def as_pattern(p: str | re.Pattern[str] | Pattern) -> Pattern:
    if isinstance(p, Pattern):
        return p
    return Pattern(CUSTOM, re.compile(p) if isinstance(p, str) else p)


def found(text: str, patterns: Iterable[Pattern]) -> Iterator[tuple[Pattern, re.Match[str], int, int]]:
    """Each match of `patterns` in `text` that is what its kind says, with the span of its value (the
    `value` group where there is one, else the whole match)."""
    for pattern in patterns:
        for match in pattern.regex.finditer(text):
            if pattern.kind == "phone" and not _phone(match.group(0)):
                continue
            if "value" in pattern.regex.groupindex and match.group("value") is not None:
                start, end = match.span("value")
            else:
                start, end = match.span()
            if end > start:
                yield pattern, match, start, end


def redacted(text: str, patterns: Iterable[Pattern]) -> tuple[str, tuple[str, ...]]:
    """`text` with what each pattern finds replaced by `[redacted:KIND]`, and each kind found, once.

    One pattern at a time, over the text as the patterns before it left it: a key block replaced whole is
    not then found again in pieces. For text no task owns (a memory, a document, an export), where there
    is no vault to keep the value for a tool: it is dropped.
    """
    kinds: list[str] = []
    for pattern in patterns:
        spans = [(start, end) for _, _, start, end in found(text, (pattern,))]
        if not spans:
            continue
        if pattern.kind not in kinds:
            kinds.append(pattern.kind)
        for start, end in reversed(spans):
            text = text[:start] + f"[redacted:{pattern.kind}]" + text[end:]
    return text, tuple(kinds)


def _phone(candidate: str) -> bool:
    digits = sum(c.isdigit() for c in candidate)
    if _DATE.search(candidate):
        return False
    international = candidate.startswith(("+", "00"))
    return (7 if international else 9) <= digits <= 15

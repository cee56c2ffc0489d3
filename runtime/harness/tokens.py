"""The HTTP API's tokens, one per program: made, listed and revoked as events, checked by their hash.

A token is 32 random bytes, shown once when it is made; the log keeps its sha256 only, so neither an
export nor a copy of the database gives a token away. A revoked token opens nothing from then on.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from runtime.errors import InvalidCommand, NotFound
from store.events import API_TOKENS_STREAM, ApiTokenCreated, ApiTokenRevoked, Recorded

PREFIX = "agentd_"


@dataclass(frozen=True)
class Token:
    name: str
    sha256: str
    created_at: str
    revoked_at: str | None = None


def tokens(records: Iterable[Recorded]) -> dict[str, Token]:
    """Each token by name, as the log leaves it (a name may be made again once its token is revoked)."""
    found: dict[str, Token] = {}
    for rec in records:
        e = rec.event
        if isinstance(e, ApiTokenCreated):
            found[e.name] = Token(e.name, e.sha256, rec.recorded_at)
        elif isinstance(e, ApiTokenRevoked) and e.name in found:
            t = found[e.name]
            found[e.name] = Token(t.name, t.sha256, t.created_at, rec.recorded_at)
    return found


def create(store, name: str, *, by: str) -> str:
    """A new token for `name`, recorded by its hash; the token itself is returned once, and nowhere kept."""
    known = tokens(store.read_stream(API_TOKENS_STREAM))
    if name in known and known[name].revoked_at is None:
        raise InvalidCommand(f"a token named {name!r} exists; revoke it first (agentd api token revoke {name})")
    token = PREFIX + secrets.token_urlsafe(32)
    try:
        event = ApiTokenCreated(name=name, sha256=digest(token))
    except ValueError:
        raise InvalidCommand(
            f"token name {name!r}: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit"
        ) from None
    store.append(API_TOKENS_STREAM, [event], actor=by)
    return token


def revoke(store, name: str, *, by: str) -> None:
    known = tokens(store.read_stream(API_TOKENS_STREAM))
    if name not in known or known[name].revoked_at is not None:
        live = sorted(n for n, t in known.items() if t.revoked_at is None)
        raise NotFound(f"no live token named {name!r} (live: {', '.join(live) or 'none'})")
    store.append(API_TOKENS_STREAM, [ApiTokenRevoked(name=name)], actor=by)


def holder(store, offered: str) -> str | None:
    """The name of the live token `offered` is, or None."""
    wanted = digest(offered)
    for t in tokens(store.read_stream(API_TOKENS_STREAM)).values():
        if t.revoked_at is None and hmac.compare_digest(t.sha256, wanted):
            return t.name
    return None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()

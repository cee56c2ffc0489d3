"""Events of the HTTP API's tokens: made for one program each, and revoked; only their hashes are kept."""

from __future__ import annotations

from pydantic import Field

from store.events._base import Event

API_TOKENS_STREAM = "api-tokens"


class ApiTokenCreated(Event):
    """A token for one program: the log keeps its sha256, never the token, which is shown once."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class ApiTokenRevoked(Event):
    name: str

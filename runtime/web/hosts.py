"""Hosts: the names the page answers to, and the origin a form that changes something must come from.

DNS rebinding: a page on another site makes its own name resolve to 127.0.0.1 and then talks to
agentd's page as if it were its own, sending its own name as Host. The address agentd listens on is
no defence; the Host header is. So the page answers only to loopback names, the host it was told to
serve on, and the address the connection actually reached (an IP literal, which no other site can
send as its own name), and it takes a POST only from its own origin.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"localhost"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
# A browser sends these on every request it makes; "none" is the user's own typing or bookmark.
SAME_SITE_FETCHES = frozenset({"same-origin", "none"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def name_of(host_header: str) -> str | None:
    """The host name in a Host header ("name", "name:port", "[v6]:port"), lowercased; None if malformed."""
    value = host_header.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
        if not bracket or (rest and port is None):
            return None
    else:
        name, colon, port = value.partition(":")
        port = port if colon else None
        if ":" in (port or ""):
            return None
    if not name or (port is not None and not port.isdigit()):
        return None
    # "localhost." is the same name written as fully qualified.
    return name.rstrip(".") or None


def _loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostGuard:
    """ASGI middleware: 421 for a Host the page does not serve, 403 for a state change from another origin."""

    def __init__(self, app: ASGIApp, host: str) -> None:
        self.app = app
        configured = name_of(host) or host.lower()
        self.names = {configured}
        if configured in WILDCARDS:
            # Listening everywhere (allow_remote): this machine's own name is one people will type.
            self.names.add(socket.gethostname().lower())

    def serves(self, name: str | None, scope: Scope) -> bool:
        if name is None:
            return False
        if _loopback(name) or name in self.names:
            return True
        # The address this connection reached: uvicorn gives the socket's own, which is an IP literal.
        server = scope.get("server")
        return bool(server) and name == str(server[0]).lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not self.serves(name_of(host), scope):
            refusal = PlainTextResponse(
                f"agentd's page does not answer to the host name {host!r}; open the address agentd printed.",
                status_code=421,
            )
            await refusal(scope, receive, send)
            return
        if scope.get("method", "GET") not in SAFE_METHODS and not same_origin(headers, host):
            refusal = PlainTextResponse(
                "This request did not come from agentd's own page; nothing was recorded.", status_code=403
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def same_origin(headers: Headers, host: str) -> bool:
    """Whether a browser says the request comes from the page at `host`; a client that is no browser
    says nothing, and the session's CSRF token is what stops it."""
    origin = headers.get("origin")
    fetch_site = headers.get("sec-fetch-site")
    if origin is not None and origin.strip().lower() != "null":
        parsed = urllib.parse.urlsplit(origin)
        return parsed.scheme in ("http", "https") and parsed.netloc.lower() == host.strip().lower()
    if origin is not None:
        # "null": the page's own forms send it too, since the page's Referrer-Policy is no-referrer
        # (the Fetch standard serializes the origin of such a POST as null). Sec-Fetch-Site, which no
        # referrer policy changes, then tells the page's own form from a sandboxed frame or a file.
        return fetch_site is not None and fetch_site.lower() in SAME_SITE_FETCHES
    return fetch_site is None or fetch_site.lower() in SAME_SITE_FETCHES


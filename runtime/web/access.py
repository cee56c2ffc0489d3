"""Access to the web page: one random token per data directory, exchanged for a session cookie.

As Jupyter does it: the token is made on first start, kept in the data directory (readable by its
owner only) and shown with the page's address. A browser that opens `/?token=...` gets a session
cookie; every form that changes state carries a CSRF token bound to that session. Both are HMACs
keyed by the page token, so nothing about sessions is kept in memory or lost on a restart, and a
new token (delete the file) ends every session at once.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from pathlib import Path

from runtime.errors import ConfigError

TOKEN_FILE = "page-token"
SESSION_COOKIE = "agentd_session"
CSRF_FIELD = "csrf"


def page_token(data_dir: Path) -> str:
    """The data directory's page token, made (atomically, mode 0600) the first time it is asked for."""
    path = data_dir / TOKEN_FILE
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    fresh = path.with_name(f".{TOKEN_FILE}.{secrets.token_hex(4)}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
            f.flush()
            os.fsync(f.fileno())
        # link, not rename: if two processes start at once, the first token wins and both use it.
        try:
            os.link(fresh, path)
        except FileExistsError:
            pass
    finally:
        fresh.unlink(missing_ok=True)
    return _read(path)


def _read(path: Path) -> str:
    token = path.read_text().strip()
    if len(token) < 16:
        raise ConfigError(f"{path} holds no usable page token; delete it and agentd makes a new one")
    return token


def new_session(token: str) -> str:
    nonce = secrets.token_urlsafe(16)
    return f"{nonce}.{_mac(token, 'session', nonce)}"


def valid_session(token: str, cookie: str | None) -> bool:
    if not cookie or "." not in cookie:
        return False
    nonce, mac = cookie.split(".", 1)
    return hmac.compare_digest(mac, _mac(token, "session", nonce))


def csrf_token(token: str, cookie: str) -> str:
    """The CSRF token of one session: forms carry it, and a cross-site page cannot read it."""
    return _mac(token, "csrf", cookie)


def valid_csrf(token: str, cookie: str | None, value: str | None) -> bool:
    return bool(cookie and value) and hmac.compare_digest(value, csrf_token(token, cookie))


def valid_token(token: str, offered: str | None) -> bool:
    return bool(offered) and hmac.compare_digest(offered.encode(), token.encode())


def _mac(token: str, purpose: str, value: str) -> str:
    return hmac.new(token.encode(), f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, allow_remote: bool) -> None:
    """The page lets whoever has the token approve commands: off this machine only when asked for."""
    if not is_loopback(host) and not allow_remote:
        raise ConfigError(
            f"the web page would listen on {host}, reachable from other machines; set allow_remote = true "
            "(AGENTD_ALLOW_REMOTE=1) to mean it, and keep the page token secret"
        )

"""The data folder's signing key: the secret under which `events export --sign` signs a log (store/chain.py).

32 random bytes, written as 64 hex digits in `export.key` in the data folder the first time an export is
signed, readable by its owner alone, and never part of an export: whoever holds a copy can check a signed
file with `events verify --key` (or `events import --key`), and could also sign one, so it is handed only
to whom may vouch for the log. agentd's file tools refuse the data folder, so a task does not read it
through them; a shell command a person approved runs as that person does.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from pathlib import Path

from store import chain
from store.errors import AgentdError

NAME = "export.key"
_HEX = re.compile(r"[0-9a-f]{64}")


class UnusableKey(AgentdError):
    """A key file that cannot be read or is not one agentd made."""


class Key:
    def __init__(self, secret: bytes, path: Path) -> None:
        self._secret = secret
        self.path = path
        self.id = chain.key_id(secret)

    def sign(self, hash: str) -> str:
        return chain.signed(self._secret, hash)

    def sign_trailer(self, count: int, last_seq: int, last_hash: str) -> str:
        return chain.signed_trailer(self._secret, count, last_seq, last_hash)

    def __repr__(self) -> str:  # never the secret, in a log or a traceback
        return f"Key(id={self.id}, path={self.path})"


def load(path: Path) -> Key:
    """The key in `path`, which must exist."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise UnusableKey(f"{path}: no such key file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UnusableKey(f"{path}: cannot be read as a key ({e})") from None
    if not _HEX.fullmatch(text):
        raise UnusableKey(f"{path}: not a key agentd made (64 hex digits, as `events export --sign` writes)")
    return Key(bytes.fromhex(text), path)


def of_folder(data_dir: Path) -> Key:
    """The data folder's key, made on first need."""
    path = data_dir / NAME
    if not path.exists():
        _make(path)
    return load(path)


def _make(path: Path) -> None:
    # Written whole and fsynced under a temporary name, then linked into place: a second export making
    # a key at the same moment finds the first one's rather than replacing it, and a crash leaves either
    # no key or a whole one. mkstemp creates the file for its owner alone (0600).
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".export-key-")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    finally:
        os.unlink(tmp)

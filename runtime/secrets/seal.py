"""The data folder's vault key: what a secret's value is encrypted under, in the vault and in the artifact store.

32 random bytes (a Fernet key: AES-128-CBC with an HMAC-SHA256 tag) in `vault.key` in the data folder,
made on first need, readable by its owner alone, never exported. The database and the artifact store
then hold only ciphertext: a copy of either, a backup, or grep through them shows no secret. Whoever
can read the data folder can read the key too: it protects what leaves the folder, not the folder.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.errors import ConfigError

if TYPE_CHECKING:  # imported when a secret is first sealed: most commands never need it
    from cryptography.fernet import Fernet

NAME = "vault.key"
# The start of a sealed artifact: the store's name for a blob stays the hash of what it holds unsealed.
SEALED = b"agentd-sealed:1\n"


class Seal:
    """Encrypt and decrypt under the key in `path`, made when first needed."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fernet: Fernet | None = None
        self._secret: bytes | None = None

    def encrypt(self, data: bytes) -> bytes:
        return self._key().encrypt(data)

    def decrypt(self, token: bytes) -> bytes:
        from cryptography.fernet import InvalidToken

        try:
            return self._key().decrypt(token)
        except InvalidToken:
            raise ConfigError(f"{self.path} is not the key this vault was sealed with") from None

    def digest(self, value: str) -> str:
        """A value's name in the vault: keyed, so that the digest of a short password cannot be guessed."""
        self._key()
        assert self._secret is not None
        return hmac.new(self._secret, value.encode(), hashlib.sha256).hexdigest()

    def seal(self, data: bytes) -> bytes:
        return SEALED + self.encrypt(data)

    def unseal(self, stored: bytes) -> bytes:
        return self.decrypt(stored[len(SEALED):]) if stored.startswith(SEALED) else stored

    def _key(self) -> Fernet:
        if self._fernet is None:
            from cryptography.fernet import Fernet

            self._secret = _load_or_make(self.path)
            self._fernet = Fernet(base64.urlsafe_b64encode(self._secret))
        return self._fernet

    def __repr__(self) -> str:  # never the key, in a log or a traceback
        return f"Seal(path={self.path})"


def _load_or_make(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return _make(path)
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot be read as the vault key ({e})") from None
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != 32:
        raise ConfigError(f"{path}: not a vault key agentd made (64 hex digits)")
    return secret


def _make(path: Path) -> bytes:
    secret = os.urandom(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole and private before it has its name: two processes making it at once each write a
    # file, and the first name taken wins; the loser reads the winner's.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".vault-key-")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secret.hex() + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return _load_or_make(path)
    finally:
        os.unlink(tmp)
    return secret

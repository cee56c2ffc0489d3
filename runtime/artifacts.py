"""A content-addressed blob store: each artifact is named by its sha256 and written once, atomically.

A blob that holds a secret (runtime.secrets) is stored sealed, encrypted under the data folder's vault
key, still named by the hash of what it holds: a file a task wrote with a key in it can be shown and put
back, and the store's files show no key to whoever reads or copies them.

Where several hosts serve one database (PostgreSQL), each blob also goes into the database's `blobs`
table (store/blobs.py), sealed as on disk, and a blob this host lacks is fetched from there and kept:
a task resumed on another host, or undone from another host's page, finds the bytes its events name.
The vault key is not in the database: every host's data folder holds a copy of the same `vault.key`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from runtime.atomic import fsync_dir, replace_file, sync_filesystem
from runtime.errors import NotFound
from runtime.secrets import Secrets
from runtime.secrets.seal import SEALED
from store.blobs import BlobTable
from store.errors import AgentdError, StoreError

REF_PREFIX = "artifact://sha256/"
# Stored bytes by their sha256 (as events name a file's content); None when the store does not hold them.
Fetch = Callable[[str], bytes | None]
# fullmatch on a closed alphabet: a ref can never carry "/", "..", or a NUL into a file path.
_REF = re.compile(r"artifact://sha256/(?P<hex>[0-9a-f]{64})")


def ref_for(data: bytes) -> str:
    """The ref `put(data)` returns, without storing anything."""
    return REF_PREFIX + hashlib.sha256(data).hexdigest()


def is_ref(value: str) -> bool:
    return isinstance(value, str) and _REF.fullmatch(value) is not None


class ArtifactStore:
    """Blobs under `root` (the data directory's `artifacts/`), stored at `<root>/<hex[:2]>/<hex>`.

    The name is the hash, so a put is idempotent and a get can prove it returns what was put.
    """

    def __init__(self, root: Path, secrets: Secrets | None = None, shared: BlobTable | None = None) -> None:
        self.root = Path(root)
        # The vault key sits in the data folder, the parent of `root`, as settings.artifacts_dir has it.
        self.secrets = secrets if secrets is not None else Secrets(self.root.parent)
        self.shared = shared

    def put(self, data: bytes, *, sync: bool = True) -> str:
        """Store `data` under its hash. With `sync=False` it is not flushed to disk until `flush()`:
        a snapshot of thousands of files flushes once rather than once per file (about 1 ms each here)."""
        digest = hashlib.sha256(data).hexdigest()
        target = self._path(digest)
        if target.is_file() and self._holds(target, digest):
            return REF_PREFIX + digest
        target.parent.mkdir(parents=True, exist_ok=True)
        stored = self.secrets.seal.seal(data) if self.secrets.holds_secret(data) else data
        if self.shared is not None:
            # The database first: a file here names a blob every host can read, so a later put of the same
            # bytes, which stops at the file, never leaves the table without it.
            self.shared.put(digest, stored)
        # Private to agentd's user: artifacts hold prompts and tool output, which may carry what no
        # pattern knows for a secret.
        replace_file(target, stored, mode=0o600, sync=sync)
        if sync:
            fsync_dir(target.parent)
        return REF_PREFIX + digest

    def flush(self) -> None:
        """Make every artifact put with `sync=False` durable: one flush of the file system that holds them."""
        sync_filesystem(self.root)

    def get(self, ref: str) -> bytes:
        digest = _digest(ref)
        fetched = False
        try:
            stored = self._path(digest).read_bytes()
        except FileNotFoundError:
            found = self.shared.get(digest) if self.shared is not None else None
            if found is None:
                raise NotFound(f"artifact {ref} does not exist") from None
            stored, fetched = found, True
        data = self.secrets.seal.unseal(stored) if stored.startswith(SEALED) else stored
        if hashlib.sha256(data).hexdigest() != digest:
            raise StoreError(f"artifact {ref} is damaged: its content no longer matches its hash")
        if fetched:
            self._keep(digest, stored)
        return data

    def find(self, sha256: str) -> bytes | None:
        """The bytes stored under `sha256` (a bare hash, as events name a file's content); None when the
        store does not hold them."""
        try:
            return self.get(REF_PREFIX + sha256)
        except NotFound:
            return None

    def exists(self, ref: str) -> bool:
        if not is_ref(ref):
            return False
        digest = _digest(ref)
        return self._path(digest).is_file() or (self.shared is not None and self.shared.has(digest))

    def _keep(self, digest: str, stored: bytes) -> None:
        """Keep a blob fetched from the database here, for the next read."""
        target = self._path(digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Not synced: a copy lost in a crash is fetched again.
        replace_file(target, stored, mode=0o600, sync=False)

    def _holds(self, path: Path, digest: str) -> bool:
        """Whether `path` already holds the blob named `digest`, sealed or not."""
        with path.open("rb") as f:
            sealed = f.read(len(SEALED)) == SEALED
        if not sealed:
            return _sha256_of(path) == digest
        try:
            return hashlib.sha256(self.secrets.seal.unseal(path.read_bytes())).hexdigest() == digest
        except AgentdError:
            return False

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest


def _digest(ref: str) -> str:
    match = _REF.fullmatch(ref) if isinstance(ref, str) else None
    if match is None:
        raise NotFound(f"{ref!r} is not an artifact ref (expected {REF_PREFIX}<64 hex digits>)")
    return match["hex"]


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

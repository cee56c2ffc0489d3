"""Per-session KV states of one llama.cpp context, kept in a least-recently-used store bounded in bytes."""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from runtime.errors import InferenceError


@dataclass(frozen=True)
class KvSnapshot:
    """What a llama.cpp context held after a call: its token ids and its serialized state (mostly the KV cache).

    Measured for SmolLM2-135M: 23,056 bytes per token of context (30 layers x 3 KV heads x 64 dims x
    K and V x 2 bytes of f16, plus the token id) and under 1 KiB more: a 4,000-token session is about 88 MiB.
    """

    tokens: np.ndarray
    data: bytearray

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def nbytes(self) -> int:
        return len(self.data) + self.tokens.nbytes


def state_size(llama) -> int:
    """Bytes a snapshot of `llama` would take now, without copying anything."""
    import llama_cpp

    return int(llama_cpp.llama_state_get_size(llama._ctx.ctx)) + llama.n_tokens * llama.input_ids.itemsize


def capture(llama) -> KvSnapshot:
    """Copy the context's state out of llama.cpp.

    `Llama.save_state()` would also copy its logits buffer (n_batch x n_vocab floats, 100 MB for this model
    whatever the context length), which agentd never reads; this copies only llama.cpp's own state, once.
    """
    import llama_cpp

    size = int(llama_cpp.llama_state_get_size(llama._ctx.ctx))
    data = bytearray(size)
    view = (ctypes.c_uint8 * size).from_buffer(data)
    written = int(llama_cpp.llama_state_get_data(llama._ctx.ctx, view, size))
    del view  # the bytearray cannot be resized while ctypes holds a view of it
    if written > size:
        raise InferenceError(f"llama.cpp wrote {written} bytes of state into a {size}-byte buffer")
    del data[written:]
    return KvSnapshot(tokens=llama.input_ids[: llama.n_tokens].copy(), data=data)


def restore(llama, snapshot: KvSnapshot) -> None:
    """Put a snapshot back into the context, as `Llama.load_state()` would."""
    import llama_cpp

    size = len(snapshot.data)
    view = (ctypes.c_uint8 * size).from_buffer(snapshot.data)
    try:
        read = int(llama_cpp.llama_state_set_data(llama._ctx.ctx, view, size))
    finally:
        del view
    if read != size:
        llama.reset()
        raise InferenceError(f"llama.cpp read {read} of {size} bytes of a saved state")
    llama.input_ids[: snapshot.n_tokens] = snapshot.tokens
    llama.n_tokens = snapshot.n_tokens
    # The restored logits were not produced by a live decode: make the next call decode at least one token.
    llama._requires_eval = True


@dataclass(frozen=True)
class KvCacheStats:
    entries: int
    bytes: int
    capacity_bytes: int
    hits: int
    misses: int
    evictions: int
    rejected: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class KvStateCache:
    """Snapshots by session, least recently used first out when their total exceeds `capacity_bytes`.

    A session's snapshot leaves the cache when it is taken back into the context: the context then holds
    the only current copy, and the cache counts only sessions that are not loaded.
    """

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must be 0 or more")
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[str, KvSnapshot] = OrderedDict()
        self._bytes = 0
        self._hits = self._misses = self._evictions = self._rejected = 0

    def __contains__(self, session: str) -> bool:
        return session in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def fits(self, nbytes: int) -> bool:
        return nbytes <= self.capacity_bytes

    def put(self, session: str, snapshot: KvSnapshot) -> None:
        self.discard(session)
        if not self.fits(snapshot.nbytes):
            self._rejected += 1
            return
        self._entries[session] = snapshot
        self._bytes += snapshot.nbytes
        while self._bytes > self.capacity_bytes:
            _, oldest = self._entries.popitem(last=False)
            self._bytes -= oldest.nbytes
            self._evictions += 1

    def reject(self) -> None:
        """Count a snapshot that was not even taken because it could never fit."""
        self._rejected += 1

    def take(self, session: str) -> KvSnapshot | None:
        snapshot = self._entries.pop(session, None)
        if snapshot is None:
            self._misses += 1
            return None
        self._bytes -= snapshot.nbytes
        self._hits += 1
        return snapshot

    def discard(self, session: str) -> None:
        snapshot = self._entries.pop(session, None)
        if snapshot is not None:
            self._bytes -= snapshot.nbytes

    def stats(self) -> KvCacheStats:
        return KvCacheStats(
            entries=len(self._entries),
            bytes=self._bytes,
            capacity_bytes=self.capacity_bytes,
            hits=self._hits,
            misses=self._misses,
            evictions=self._evictions,
            rejected=self._rejected,
        )

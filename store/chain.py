"""The chain of hashes over the log: each row's hash covers its own content and the hash of the row before.

The definition is part of the export format and of every database written since: it must never change
(tests/store/test_log_evidence.py pins it). A hash covers the row as stored, payload bytes included, so a
row changed, dropped or inserted after the fact breaks the chain at its seq.

The chain needs no secret, so anyone can compute it: it proves a log whole and in order, not who made
it. The keyed chain proves that: a signed export carries, beside each hash, an HMAC of it under the
data folder's key (store/key.py), and one of its trailer. As each hash covers every event before it,
each signature vouches for the file up to its line, and the trailer's for the whole.
"""

from __future__ import annotations

import hmac
from hashlib import sha256
from json.encoder import encode_basestring_ascii as _string
from typing import Iterable, Sequence

GENESIS = "0" * 64
"""What the first event's hash follows."""


def link(prev: str, row: Sequence) -> str:
    """The hash of `row` (an events row in column order, without its hash) following `prev`.

    Hashed: `prev`, the other columns as one compact JSON array, then the payload as stored, each on
    a line of its own. The payload, the largest column, is not escaped again, and no field can pass
    for another. The array is spelled out rather than left to json.dumps, which costs half as much
    again. `rows` computes the same for many rows at once.
    """
    seq, stream_id, version, type_name, schema_version, payload, recorded_at, actor, causation, correlation = row
    head = (
        f"[{seq:d},{_string(stream_id)},{version:d},{_string(type_name)},{schema_version:d},"
        f"{_string(recorded_at)},{_string(actor)},{_optional(causation)},{_optional(correlation)}]"
    )
    return sha256(f"{prev}\n{head}\n{payload}".encode()).hexdigest()


def rows(prev: str, records: Iterable[Sequence], payloads: Iterable[bytes]) -> list[tuple]:
    """The events rows of `records` (`Recorded`s, in log order) in table column order, each ending in
    its hash, the first following `prev`: `link` applied row after row.

    The append path's way, where a batch of a thousand events spent more time here than SQLite spent
    storing them. `payloads` are the events serialised as UTF-8 bytes (as pydantic gives them), hashed
    as they are. The columns a request's rows share (stream, time, actor, causation, correlation) are
    escaped once per run of rows that holds the very same objects, and each event class's name and
    schema once; each row is built once, hash included.
    """
    out: list[tuple] = []
    append = out.append
    kinds: dict[type, tuple[str, int, str]] = {}
    last_stream = last_at = last_actor = last_causation = last_correlation = _UNSET
    stream = tail = ""
    for record, payload in zip(records, payloads, strict=True):
        seq, stream_id, version, recorded_at, actor, causation, correlation, event = record
        cls = type(event)
        kind = kinds.get(cls)
        if kind is None:
            kind = kinds[cls] = (cls.__name__, cls.schema_version, f"{_string(cls.__name__)},{cls.schema_version:d},")
        type_name, schema_version, spelled = kind
        if stream_id is not last_stream:
            stream, last_stream = _string(stream_id), stream_id
        if (recorded_at is not last_at or actor is not last_actor or causation is not last_causation
                or correlation is not last_correlation):
            tail = f"{_string(recorded_at)},{_string(actor)},{_optional(causation)},{_optional(correlation)}]\n"
            last_at, last_actor, last_causation, last_correlation = recorded_at, actor, causation, correlation
        prev = sha256(f"{prev}\n[{seq:d},{stream},{version:d},{spelled}{tail}".encode() + payload).hexdigest()
        append((seq, stream_id, version, type_name, schema_version, payload.decode(), recorded_at, actor, causation,
                correlation, prev))
    return out


# Identity, not equality, tells a run of shared columns: no string is this object, and None may be a value.
_UNSET = object()


def _optional(value: str | None) -> str:
    return "null" if value is None else _string(value)


def signed(key: bytes, hash: str) -> str:
    """The signature of the event whose chain hash is `hash`: HMAC-SHA256 under `key`, named apart from the
    trailer's so that neither can stand for the other."""
    return hmac.new(key, f"agentd event\n{hash}".encode(), sha256).hexdigest()


def signed_trailer(key: bytes, count: int, last_seq: int, last_hash: str) -> str:
    """The signature of an export's trailer: how many events, to which seq, ending in which hash."""
    return hmac.new(key, f"agentd trailer\n{count:d}\n{last_seq:d}\n{last_hash}".encode(), sha256).hexdigest()


def key_id(key: bytes) -> str:
    """A name for `key` that tells keys apart and gives nothing of it away."""
    return hmac.new(key, b"agentd key id", sha256).hexdigest()[:16]

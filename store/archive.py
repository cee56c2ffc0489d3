"""Export and import of the log as JSON Lines: one event per line, exactly as recorded, then a trailer.

Each line carries the event's chain hash, and the last line is a trailer with the count, the last seq
and the last hash: a file cut at a line boundary, or with a line changed, is refused whole rather
than imported as a shorter log. A line without its hash is refused too. A payload is written and read
back as the bytes stored, so the hashes of an imported log are those of the exported one.

The chain needs no secret: whoever edits a file and computes the chain and the trailer again has a
file that checks. A signed export (`--sign`) also carries each hash's signature under the data
folder's key (`mac`, store/chain.py), and the trailer names the key and is signed; given the key,
verify and import refuse the first line, or the trailer, that the key did not sign.
"""

from __future__ import annotations

import hmac
import json
from typing import Any, Callable, Iterable, Iterator, NamedTuple, TextIO

from sqlalchemy import Connection

from store import audit, log, projections
from store.chain import GENESIS, link
from store.errors import AgentdError, LogDamaged, StoreError
from store.events import Recorded, decode
from store.key import Key
from store.log import COLUMNS, RawEvent
from store.mark import Position
from store.state import fold_all

_FIELDS = tuple(c for c in COLUMNS if c not in ("payload", "hash"))
_INT_FIELDS = ("seq", "stream_version", "schema_version")
_OPTIONAL = ("causation_id", "correlation_id")
_PAYLOAD_KEY = '"payload":'
_decoder = json.JSONDecoder()
CHUNK = 5000


_SEALED = ("count", "last_seq", "last_hash")
_SIGNED = (*_SEALED, "key_id", "mac")


class Sealed(NamedTuple):
    """What a whole export holds, as its trailer says and its lines prove."""

    count: int
    last_seq: int
    last_hash: str
    key_id: str | None = None
    """The id of the key that signed the export (store/key.py); None for an unsigned one."""


def line_of(raw: RawEvent, signature: str | None = None) -> str:
    """One event as a line: its columns, its hash (and its signature), then its payload as stored (a JSON
    object), last."""
    obj: dict[str, Any] = {f: getattr(raw, f) for f in _FIELDS}
    obj["hash"] = raw.hash
    if signature is not None:
        obj["mac"] = signature
    return f'{_dumps(obj)[:-1]},{_PAYLOAD_KEY}{raw.payload}}}'


def trailer_of(sealed: Sealed, key: Key | None = None) -> str:
    said: dict[str, Any] = {"count": sealed.count, "last_seq": sealed.last_seq, "last_hash": sealed.last_hash}
    if key is not None:
        said["key_id"] = key.id
        said["mac"] = key.sign_trailer(sealed.count, sealed.last_seq, sealed.last_hash)
    return _dumps({"trailer": said})


def chained(lines: Iterable[str]) -> list[str]:
    """Event lines made some other way than by `export` (a fixture, by hand), each given its chain hash,
    then the trailer. Anyone can do this: it is why only a signature says who made a file."""
    out, prev, count, last_seq = [], GENESIS, 0, 0
    for line in lines:
        if not line.strip():
            continue
        obj = json.loads(line)
        payload = _payload_text(line, obj["payload"])
        prev = link(prev, tuple(payload if c == "payload" else obj[c] for c in COLUMNS if c != "hash"))
        head = {**{f: obj[f] for f in _FIELDS}, "hash": prev}
        out.append(f"{_dumps(head)[:-1]},{_PAYLOAD_KEY}{payload}}}")
        count, last_seq = count + 1, obj["seq"]
    return [*out, trailer_of(Sealed(count, last_seq, prev))]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def export(
    conn: Connection,
    out: TextIO,
    *,
    committed: Position | None = None,
    key: Key | None = None,
    rewrite: Callable[[str], str] | None = None,
) -> Sealed:
    """Write the log to `out`, signed with `key` if given. A log behind `committed` (store.mark.committed,
    read before `conn`'s snapshot) is refused before a line is written: sealed, it would import as a whole
    log. So is a log whose chain breaks, at that event (to stdout, the lines before it are out, without
    the trailer an import needs): what agentd seals or signs is the log as it committed it.

    `rewrite` turns each payload into the one written (`events export --redact`); the chain is then
    hashed again over what is written, after the log's own chain was checked, so the file imports and
    replays as a log of its own."""
    audit.check_mark(conn, committed)
    count, last_seq, last_hash = 0, 0, GENESIS
    written = GENESIS
    for raw in log.iter_raw(conn):
        broken = audit.chain_break(raw, last_seq + 1, last_hash)
        if broken is not None:
            raise LogDamaged(broken)
        count, last_seq, last_hash = count + 1, raw.seq, raw.hash
        if rewrite is not None:
            payload = rewrite(raw.payload)
            written = link(written, tuple(payload if c == "payload" else getattr(raw, c) for c in COLUMNS[:-1]))
            raw = raw._replace(payload=payload, hash=written)
        out.write(line_of(raw, None if key is None else key.sign(raw.hash)))
        out.write("\n")
    sealed = Sealed(count, last_seq, last_hash if rewrite is None else written)
    out.write(trailer_of(sealed, key))
    out.write("\n")
    return sealed._replace(key_id=None if key is None else key.id)


def parse_lines(lines: Iterable[str], checker: _Checker) -> Iterator[tuple[tuple, Recorded]]:
    """Validate each line completely (shape, order, versions, type, payload, hash) before anything is
    written, and at the end the trailer: a file without its trailer raises after its last line."""
    number = 0
    try:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                parsed = checker.parse(line)
            except (AgentdError, ValueError) as e:
                raise StoreError(f"line {number}: {e}") from None
            if parsed is not None:
                yield parsed
    except UnicodeDecodeError:
        raise StoreError(f"line {number + 1}: not UTF-8") from None
    if checker.trailer is None:
        raise StoreError(
            f"the file ends after {checker.count} events without the trailer `agentd events export` writes "
            "last: it was cut short, or not made by an export"
        )


class _Checker:
    """What the lines so far establish: the last seq and hash, each stream's version, whether the lines are
    signed, the trailer. Given a key, every signature is checked against it."""

    def __init__(self, key: Key | None = None) -> None:
        self.key = key
        self.count = 0
        self.last_seq = 0
        self.last_hash = GENESIS
        self.versions: dict[str, int] = {}
        self.signed: bool | None = None
        self.trailer: Sealed | None = None

    def parse(self, line: str) -> tuple[tuple, Recorded] | None:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"not JSON ({e.msg})") from None
        if self.trailer is not None:
            raise ValueError("a line after the trailer, which must be the last")
        if isinstance(obj, dict) and "trailer" in obj:
            self.trailer = self._sealed(obj)
            return None
        _check_shape(obj)
        seq, stream_id = obj["seq"], obj["stream_id"]
        if obj.get("hash") is None:
            raise ValueError(f"event {seq} has no hash: every line an export writes carries its event's chain hash")
        if seq != self.last_seq + 1:
            # The log has no gaps: seq is assigned under the write lock, one after another.
            raise ValueError(f"seq {seq} does not follow {self.last_seq}")
        expected = self.versions.get(stream_id, 0) + 1
        if obj["stream_version"] != expected:
            raise ValueError(f"stream {stream_id!r} jumps to version {obj['stream_version']}, expected {expected}")
        payload = _payload_text(line, obj["payload"])
        event = decode(obj["type"], obj["schema_version"], payload, seq)
        row = tuple(payload if c == "payload" else obj[c] for c in COLUMNS if c != "hash")
        hash = link(self.last_hash, row)
        if obj["hash"] != hash:
            raise ValueError(
                f"event {seq}'s hash does not match its content and the line before: the file was changed "
                "after it was exported"
            )
        self._check_signature(seq, hash, obj.get("mac"))
        self.count += 1
        self.last_seq, self.last_hash = seq, hash
        self.versions[stream_id] = expected
        rec = Recorded(
            seq=seq,
            stream_id=stream_id,
            stream_version=expected,
            recorded_at=obj["recorded_at"],
            actor=obj["actor"],
            causation_id=obj["causation_id"],
            correlation_id=obj["correlation_id"],
            event=event,
        )
        return (*row, hash), rec

    def _check_signature(self, seq: int, hash: str, mac: str | None) -> None:
        signed = mac is not None
        if self.signed is None:
            self.signed = signed
        elif signed != self.signed:
            state = "signed" if signed else "not signed"
            raise ValueError(f"event {seq} is {state}, unlike the lines before it: the file joins more than one export")
        if self.key is None:
            return
        if mac is None:
            raise ValueError(
                f"event {seq} is not signed: the file was exported without --sign, or its signatures were taken "
                "out, and --key cannot vouch for it"
            )
        if not hmac.compare_digest(mac, self.key.sign(hash)):
            raise ValueError(
                f"event {seq} is not signed with this key ({self.key.id}): it was changed and hashed again after "
                "export, or the file was exported from another data folder"
            )

    def _sealed(self, obj: dict) -> Sealed:
        said = obj["trailer"]
        if set(obj) != {"trailer"} or not isinstance(said, dict) or set(said) not in (set(_SEALED), set(_SIGNED)):
            raise ValueError(
                'a trailer holds {"trailer": {"count": ..., "last_seq": ..., "last_hash": ...}} alone, with '
                '"key_id" and "mac" too if the export is signed'
            )
        found = Sealed(self.count, self.last_seq, self.last_hash)
        if tuple(said[f] for f in _SEALED) != found[:3]:
            raise ValueError(
                f"the trailer says {said['count']} events to seq {said['last_seq']} ending in hash "
                f"{str(said['last_hash'])[:12]}, but the lines hold {found.count} to seq {found.last_seq} "
                f"ending in {found.last_hash[:12]}"
            )
        signed = "mac" in said
        if self.signed is not None and signed != self.signed:
            raise ValueError("the trailer is signed and the lines are not" if signed else
                             "the lines are signed and the trailer is not")
        if signed and not (isinstance(said["key_id"], str) and isinstance(said["mac"], str)):
            raise ValueError("the trailer's key_id and mac must be strings")
        if self.key is not None:
            if not signed:
                raise ValueError("the trailer is not signed, and --key cannot vouch for the file")
            expected = self.key.sign_trailer(found.count, found.last_seq, found.last_hash)
            if said["key_id"] != self.key.id or not hmac.compare_digest(said["mac"], expected):
                raise ValueError(
                    f"the trailer is not signed with this key ({self.key.id}): the file was cut short or sealed "
                    "again after export, or the trailer is another export's"
                )
        return found._replace(key_id=said.get("key_id"))


def _payload_text(line: str, payload: Any) -> str:
    """The payload exactly as the line spells it, so that its hash is the stored one's; re-encoded only
    where the line is not in the form an export writes."""
    at = line.find(_PAYLOAD_KEY)
    if at >= 0:
        start = at + len(_PAYLOAD_KEY)
        while line[start : start + 1] in (" ", "\t"):
            start += 1
        try:
            value, end = _decoder.raw_decode(line, start)
        except ValueError:
            value, end = None, start
        if end > start and value == payload:
            return line[start:end]
    return _dumps(payload)


def _check_shape(obj: Any) -> None:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    missing = [f for f in (*_FIELDS, "payload") if f not in obj]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    extra = sorted(set(obj) - {*_FIELDS, "payload", "hash", "mac"})
    if extra:
        raise ValueError(f"unexpected {', '.join(extra)}")
    if not isinstance(obj["payload"], dict):
        raise ValueError("payload must be a JSON object")
    for f in _FIELDS:
        value = obj[f]
        if f in _INT_FIELDS:
            if type(value) is not int:
                raise ValueError(f"{f} must be an integer")
        elif not isinstance(value, str) and not (f in _OPTIONAL and value is None):
            raise ValueError(f"{f} must be a string")
    for f in ("hash", "mac"):
        if obj.get(f) is not None and not isinstance(obj[f], str):
            raise ValueError(f"{f} must be a string")


def import_into(conn: Connection, lines: Iterable[str], key: Key | None = None) -> Sealed:
    """Load an export into an empty store inside the caller's transaction: all of it, or nothing. Given a
    key, every line and the trailer must be signed with it. Returns what the trailer sealed."""
    if log.last_seq(conn) != 0:
        raise StoreError("import needs an empty store; this one already holds events")
    count = 0
    rows: list[tuple] = []
    records: list[Recorded] = []
    checker = _Checker(key)
    for row, rec in parse_lines(lines, checker):
        rows.append(row)
        records.append(rec)
        if len(rows) >= CHUNK:
            count += _flush(conn, rows, records)
            rows, records = [], []
    if rows:
        count += _flush(conn, rows, records)
    assert checker.trailer is not None and checker.trailer.count == count  # parse_lines saw to both
    return checker.trailer


def verify(lines: Iterable[str], key: Key | None = None) -> Sealed:
    """Check an export as an import would (lines, chain, trailer, signatures given a key, and the fold's
    rules), writing nothing."""
    checker = _Checker(key)
    fold_all(rec for _, rec in parse_lines(lines, checker))
    assert checker.trailer is not None  # parse_lines raises at the end of a file without one
    return checker.trailer


def _flush(conn: Connection, rows: list[tuple], records: list[Recorded]) -> int:
    log.INSERT.insert(conn, rows)
    projections.apply(conn, records)
    return len(rows)

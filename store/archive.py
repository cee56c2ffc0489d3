"""Export and import of the log as JSON Lines: one event per line, exactly as recorded."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, TextIO

from sqlalchemy import Connection

from store import log, projections
from store.errors import AgentdError, StoreError
from store.events import Recorded, decode
from store.log import COLUMNS, RawEvent

_FIELDS = tuple(c for c in COLUMNS if c != "payload")
_INT_FIELDS = ("seq", "stream_version", "schema_version")
_OPTIONAL = ("causation_id", "correlation_id")
CHUNK = 5000


def line_of(raw: RawEvent) -> str:
    """One event as a line; payload last, as a JSON object, so the file is readable and greppable."""
    obj: dict[str, Any] = {f: getattr(raw, f) for f in _FIELDS}
    obj["payload"] = json.loads(raw.payload)
    return _dumps(obj)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def export(conn: Connection, out: TextIO) -> int:
    count = 0
    for raw in log.iter_raw(conn):
        out.write(line_of(raw))
        out.write("\n")
        count += 1
    return count


def parse_lines(lines: Iterable[str]) -> Iterator[tuple[tuple, Recorded]]:
    """Validate each line completely (shape, order, versions, type, payload) before anything is written."""
    checker = _Checker()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield checker.parse(line)
        except (AgentdError, ValueError) as e:
            raise StoreError(f"line {number}: {e}") from None


class _Checker:
    """What the lines so far establish: the last seq and each stream's version."""

    def __init__(self) -> None:
        self.last_seq = 0
        self.versions: dict[str, int] = {}

    def parse(self, line: str) -> tuple[tuple, Recorded]:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"not JSON ({e.msg})") from None
        _check_shape(obj)
        seq, stream_id = obj["seq"], obj["stream_id"]
        if seq != self.last_seq + 1:
            # The log has no gaps: seq is assigned under the write lock, one after another.
            raise ValueError(f"seq {seq} does not follow {self.last_seq}")
        expected = self.versions.get(stream_id, 0) + 1
        if obj["stream_version"] != expected:
            raise ValueError(f"stream {stream_id!r} jumps to version {obj['stream_version']}, expected {expected}")
        payload = _dumps(obj["payload"])
        event = decode(obj["type"], obj["schema_version"], payload, seq)
        self.last_seq = seq
        self.versions[stream_id] = expected
        row = tuple(payload if c == "payload" else obj[c] for c in COLUMNS)
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
        return row, rec


def _check_shape(obj: Any) -> None:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    missing = [f for f in (*_FIELDS, "payload") if f not in obj]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    extra = sorted(set(obj) - {*_FIELDS, "payload"})
    if extra:
        raise ValueError(f"unexpected {', '.join(extra)}")
    for f in _FIELDS:
        value = obj[f]
        if f in _INT_FIELDS:
            if type(value) is not int:
                raise ValueError(f"{f} must be an integer")
        elif not isinstance(value, str) and not (f in _OPTIONAL and value is None):
            raise ValueError(f"{f} must be a string")


def import_into(conn: Connection, lines: Iterable[str]) -> int:
    """Load an export into an empty store inside the caller's transaction: all of it, or nothing."""
    if log.last_seq(conn) != 0:
        raise StoreError("import needs an empty store; this one already holds events")
    count = 0
    rows: list[tuple] = []
    records: list[Recorded] = []
    for row, rec in parse_lines(lines):
        rows.append(row)
        records.append(rec)
        if len(rows) >= CHUNK:
            count += _flush(conn, rows, records)
            rows, records = [], []
    if rows:
        count += _flush(conn, rows, records)
    return count


def _flush(conn: Connection, rows: list[tuple], records: list[Recorded]) -> int:
    log.INSERT.insert(conn, rows)
    projections.apply(conn, records)
    return len(rows)

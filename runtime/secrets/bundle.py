"""A log's vault carried to another data folder: `events export --vault FILE`, `events import --vault FILE`.

An export holds placeholders (`[secret:N]`) and never the values: a task imported elsewhere cannot put
its secrets back into a tool call. Asked for, the values go into a file of their own beside the export,
so that the export itself stays safe to share. The values are in plain text there: the other data folder
has another vault.key and seals them again under it on import. The file is made readable by its owner
alone, and its first line names the hash the export's chain ends in, so a vault is imported only with
the log it was written with.

    {"vault": 1, "log_last_hash": "…", "count": 2}
    {"task_id": "t-…", "number": 1, "kind": "api_key", "value": "sk-live-…"}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TextIO

from sqlalchemy import Connection

from runtime.secrets.seal import Seal
from store import vault as kept
from store.errors import AgentdError

FORMAT = 1
_ROW = {"task_id": str, "number": int, "kind": str, "value": str}


class VaultFileError(AgentdError):
    """A vault file that cannot be imported as it is; nothing was imported."""


def write(conn: Connection, seal: Seal, out: TextIO, log_last_hash: str) -> int:
    """Write every task's secrets, opened with `seal`, to `out`; the count written."""
    rows = kept.every(conn)
    out.write(_dumps({"vault": FORMAT, "log_last_hash": log_last_hash, "count": len(rows)}) + "\n")
    for row in rows:
        value = seal.decrypt(row.sealed.encode()).decode()
        out.write(_dumps({"task_id": row.task_id, "number": row.number, "kind": row.kind, "value": value}) + "\n")
    return len(rows)


def put(conn: Connection, seal: Seal, lines: Iterable[str], log_last_hash: str) -> int:
    """Seal each secret of a vault file under `seal` and put it in the (empty) vault, in the caller's
    transaction; refused whole, naming the line, when the file is not one `write` made for this log."""
    rows = [
        (kept.Held(r["task_id"], r["number"], r["kind"], seal.encrypt(r["value"].encode()).decode()),
         seal.digest(r["value"]))
        for r in _read(lines, log_last_hash)
    ]
    return kept.put(conn, rows)


def _read(lines: Iterable[str], log_last_hash: str) -> Iterator[dict]:
    header: dict | None = None
    seen: set[tuple[str, int]] = set()
    number = 0
    for number, line in _numbered(lines):
        if not line.strip():
            continue
        obj = _json(line, number)
        if header is None:
            header = _header(obj, number, log_last_hash)
            continue
        if not isinstance(obj, dict) or set(obj) != set(_ROW) or any(
            type(obj[k]) is not t for k, t in _ROW.items()  # exactly: a bool is not a number here
        ):
            raise VaultFileError(f"line {number}: a secret is an object of task_id, number, kind and value")
        place = (obj["task_id"], obj["number"])
        if place in seen:
            raise VaultFileError(f"line {number}: secret {obj['number']} of task {obj['task_id']} is there twice")
        seen.add(place)
        yield obj
    if header is None:
        raise VaultFileError("the vault file is empty: it has no header line")
    if len(seen) != header["count"]:
        raise VaultFileError(
            f"the header says {header['count']} secrets but the file holds {len(seen)}: it was cut short or edited"
        )


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    number = 0
    try:
        for number, line in enumerate(lines, start=1):
            yield number, line
    except UnicodeDecodeError:
        raise VaultFileError(f"line {number + 1}: not UTF-8") from None


def _header(obj: object, number: int, log_last_hash: str) -> dict:
    if not isinstance(obj, dict) or set(obj) != {"vault", "log_last_hash", "count"} or obj["vault"] != FORMAT:
        raise VaultFileError(f"line {number}: not a vault file `agentd events export --vault` writes")
    if not isinstance(obj["count"], int) or isinstance(obj["count"], bool) or obj["count"] < 0:
        raise VaultFileError(f"line {number}: the header's count is not a number of secrets")
    if obj["log_last_hash"] != log_last_hash:
        raise VaultFileError(
            f"the vault file was written with a log ending in hash {str(obj['log_last_hash'])[:12]}, "
            f"not this one ({log_last_hash[:12]}): import it with the export it was written beside"
        )
    return obj


def _json(line: str, number: int) -> object:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise VaultFileError(f"line {number}: not JSON ({e.msg})") from None


def _dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

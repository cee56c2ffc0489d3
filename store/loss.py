"""Losses a person accepted: a log behind its high-water mark written to again, with a record of what it lost.

Every write and every export refuses a log behind its mark (store/mark.py), since either would pass the
loss on as a log that checks. When the events cannot be restored from a backup, `agentd db accept-loss`
takes the log as it is: it appends what was lost, when and who accepted it to a file beside the mark
(`agentd.db-losses`: synced, only ever appended to), and only then sets the mark to the log's last seq.
`agentd db check` then says ok and names the last loss recorded.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import Connection

from store import audit, positions
from store.errors import StoreError
from store.mark import SUFFIX as MARK_SUFFIX, Mark

SUFFIX = "-losses"


class Loss(NamedTuple):
    """One accepted loss, as recorded: one JSON object a line."""

    accepted_at: str
    by: str
    problem: str
    mark_seq: int | None
    mark_hash: str | None
    log_ends_at: int
    log_hash: str | None
    lost_from: int | None
    lost_to: int | None

    def describe(self) -> str:
        if self.lost_from is not None:
            what = f"events {self.lost_from} to {self.lost_to} were lost"
        elif self.mark_seq is not None:
            what = f"events up to seq {self.mark_seq} were written over"
        else:
            what = "a high-water mark agentd could not read was set to the log"
        return f"{what}, accepted at {self.accepted_at} by {self.by}"


def record_of(mark: Mark) -> Path:
    """The file of losses beside `mark`."""
    return mark.path.with_name(mark.path.name.removesuffix(MARK_SUFFIX) + SUFFIX)


def accept(conn: Connection, mark: Mark, by: str) -> Loss:
    """Record that the log is behind `mark` and set the mark to the log, in the writer's transaction, so
    that nothing commits meanwhile. Refused where the log holds what the mark names."""
    try:
        committed = mark.read()
        problem = audit.mark_problem(conn, committed)
    except StoreError as e:
        committed, problem = None, str(e)
    if problem is None:
        if committed is None:
            raise StoreError(f"nothing to accept: there is no {mark.path.name}, so nothing is known to be lost")
        raise StoreError(
            f"nothing to accept: the log holds every event {mark.path.name} names (to seq {committed.seq})"
        )
    last, hash = positions.head(conn)
    behind = committed is not None and committed.seq > last
    loss = Loss(
        accepted_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        by=by,
        problem=problem,
        mark_seq=None if committed is None else committed.seq,
        mark_hash=None if committed is None else committed.hash,
        log_ends_at=last,
        log_hash=hash if last else None,
        lost_from=last + 1 if behind else None,
        lost_to=committed.seq if behind and committed is not None else None,
    )
    earlier = recorded(mark)
    # A second run after a crash between the record and the mark: the loss is recorded once.
    if not earlier or earlier[-1][2:] != loss[2:]:
        _append(record_of(mark), json.dumps(loss._asdict(), ensure_ascii=False))
    mark.reset(last, hash or "")
    return loss


def recorded(mark: Mark | None) -> list[Loss]:
    """The losses accepted on the database beside `mark`, oldest first."""
    if mark is None:
        return []
    path = record_of(mark)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(f"the record of losses {path} cannot be read ({e})") from None
    losses = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            losses.append(Loss(**json.loads(line)))
        except (ValueError, TypeError):
            raise StoreError(f"the record of losses {path} is not one agentd wrote (line {number})") from None
    return losses


def _append(path: Path, line: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (line + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as e:
        raise StoreError(f"the loss cannot be recorded in {path} ({e}); nothing was accepted") from None

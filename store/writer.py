"""The single writer: one thread that group-commits concurrent appends into one transaction per batch.

Appenders hand requests to a queue and wait on a future. While one batch is being fsynced, the next
requests queue up and then commit together, so sixteen tasks appending at once share one fsync
instead of paying one each. Each request runs in its own savepoint: a conflict or an invalid event
fails that request alone, never its neighbours, and never leaves half of it written.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable, Sequence

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from store import log, projections, sql
from store.database import translate
from store.errors import AgentdError, ConcurrencyConflict, StoreError
from store.events import Event, Recorded

MAX_BATCH = 512


@dataclass(slots=True)
class AppendRequest:
    stream_id: str
    events: Sequence[Event]
    expected_version: int | None
    actor: str
    causation_id: str | None
    correlation_id: str | None
    future: Future = field(default_factory=Future)


@dataclass(slots=True)
class _Call:
    fn: Callable[[Connection], Any]
    future: Future = field(default_factory=Future)


_STOP = object()


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Writer:
    def __init__(self, engine: Engine, url: str, max_batch: int = MAX_BATCH) -> None:
        self._engine = engine
        self._url = url
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="agentd-writer", daemon=True)
        self._started = False
        self._lock = threading.Lock()

    def submit(self, request: AppendRequest | _Call) -> Future:
        with self._lock:
            if not self._started:
                self._thread.start()
                self._started = True
        self._queue.put(request)
        return request.future

    def call(self, fn: Callable[[Connection], Any]) -> Future:
        """Run `fn(conn)` in the writer's thread inside one write transaction of its own."""
        return self.submit(_Call(fn))

    def close(self) -> None:
        with self._lock:
            if not self._started:
                return
        self._queue.put(_STOP)
        self._thread.join()

    def _run(self) -> None:
        with self._engine.connect() as conn:
            while True:
                item = self._queue.get()
                if item is _STOP:
                    return
                if isinstance(item, _Call):
                    self._run_call(conn, item)
                    continue
                batch = [item]
                stop = False
                while len(batch) < self._max_batch:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is _STOP:
                        stop = True
                        break
                    if isinstance(nxt, _Call):
                        self._commit(conn, batch)
                        self._run_call(conn, nxt)
                        batch = []
                        continue
                    batch.append(nxt)
                if batch:
                    self._commit(conn, batch)
                if stop:
                    return

    def _run_call(self, conn: Connection, call: _Call) -> None:
        try:
            with conn.begin():
                result = call.fn(conn)
        except AgentdError as e:
            call.future.set_exception(e)
        except (DBAPIError, conn.dialect.dbapi.Error) as e:
            call.future.set_exception(_with_cause(translate(e, self._url), e))
        except BaseException as e:  # noqa: BLE001  the caller's thread decides what to do with it
            call.future.set_exception(e)
        else:
            call.future.set_result(result)

    def _commit(self, conn: Connection, batch: list[AppendRequest]) -> None:
        outcomes: list[tuple[AppendRequest, list[Recorded] | BaseException]] = []
        try:
            with conn.begin():
                next_seq = log.last_seq(conn) + 1
                versions: dict[str, int] = {}
                for req in batch:
                    sql.savepoint(conn, "append")
                    try:
                        records = self._append(conn, req, next_seq, versions)
                    except AgentdError as e:
                        sql.rollback_to(conn, "append")
                        outcomes.append((req, e))
                    except (IntegrityError, conn.dialect.dbapi.IntegrityError) as e:
                        # A unique or foreign key the projections rely on: this request is wrong, not the batch.
                        sql.rollback_to(conn, "append")
                        refused = StoreError(f"append to {req.stream_id!r} refused: {getattr(e, 'orig', e)}")
                        outcomes.append((req, _with_cause(refused, e)))
                    else:
                        sql.release(conn, "append")
                        next_seq += len(records)
                        versions[req.stream_id] = records[-1].stream_version
                        outcomes.append((req, records))
        except (DBAPIError, conn.dialect.dbapi.Error) as e:
            error = _with_cause(translate(e, self._url), e)
            for req in batch:
                req.future.set_exception(error)
            return
        except BaseException as e:  # noqa: BLE001  nothing was committed; every waiter must hear so
            for req in batch:
                req.future.set_exception(e)
            return
        for req, outcome in outcomes:
            if isinstance(outcome, BaseException):
                req.future.set_exception(outcome)
            else:
                req.future.set_result(outcome)

    def _append(
        self, conn: Connection, req: AppendRequest, next_seq: int, versions: dict[str, int]
    ) -> list[Recorded]:
        if not req.events:
            raise StoreError(f"nothing to append to {req.stream_id!r}")
        current = versions.get(req.stream_id)
        if current is None:
            current = log.stream_version(conn, req.stream_id)
        if req.expected_version is not None and req.expected_version != current:
            raise ConcurrencyConflict(req.stream_id, req.expected_version, current)
        recorded_at = now_iso()
        # Positional: a named tuple built with keywords costs twice as much, once per event.
        records = [
            Recorded(next_seq + i, req.stream_id, current + 1 + i, recorded_at, req.actor, req.causation_id,
                     req.correlation_id, event)
            for i, event in enumerate(req.events)
        ]
        insert(conn, records)
        projections.apply(conn, records)
        return records


def insert(conn: Connection, records: Sequence[Recorded]) -> None:
    """Insert events with one driver-level executemany."""
    log.INSERT.insert(conn, [
        (
            r.seq,
            r.stream_id,
            r.stream_version,
            type(r.event).__name__,
            type(r.event).schema_version,
            r.event.model_dump_json(),
            r.recorded_at,
            r.actor,
            r.causation_id,
            r.correlation_id,
        )
        for r in records
    ])


def _with_cause(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error

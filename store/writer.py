"""The single writer: group-commits concurrent appends, one transaction per batch.

There is no writer thread. Appenders queue their request; whichever of them takes the writer lock
becomes the leader and commits everything queued (its own request and any that arrived while the
previous batch was being fsynced), while the others wait on their futures. An uncontended append
thus costs no thread handoff, and sixteen tasks appending at once share one fsync.

Inside a batch the work is done once, not once per request: one lookup of the stream versions, one
read of the task rows, one multi-row insert, one write of the projections. Each request is checked in
memory first (expected version, the fold); a refused request is left out and fails alone.

Before its first write the writer holds the log to its high-water mark (store/mark.py): a log behind it
lost committed events, and appending would write new events over their seqs until `db check` could no
longer tell. Every command that writes goes through here, so this one check refuses them all.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable, Sequence

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from store import audit, chain, log, positions, projections, sql
from store.database import translate
from store.errors import AgentdError, ConcurrencyConflict, StoreError
from store.events import Event, Recorded
from store.mark import Mark, Position

MAX_BATCH = 512

_new = tuple.__new__


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
    # Unguarded only for accepting a loss, which is what lets a log behind its mark be written again.
    guarded: bool = True
    future: Future = field(default_factory=Future)


@dataclass
class WriterStats:
    """Counters for operators and benchmarks: how many appends shared how many commits."""

    commits: int = 0
    appends: int = 0

    @property
    def appends_per_commit(self) -> float:
        return self.appends / self.commits if self.commits else 0.0


class _Cache:
    """What the writer knows of the database between its batches: the last seq, stream versions and
    task rows. Valid only while no other connection writes, which SQLite's data_version tells: it
    changes when another connection commits. Saves two queries per appended request."""

    LIMIT = 10_000

    def __init__(self) -> None:
        self.data_version: int | None = None
        self.last_seq: int | None = None
        self.last_hash: str | None = None
        self.versions: dict[str, int] = {}
        self.summaries: dict[str, projections.TaskSummary | None] = {}

    def check(self, conn: Connection) -> None:
        """Called inside the write transaction: forget everything if someone else wrote meanwhile."""
        if conn.dialect.name != "sqlite":
            self.clear()
            return
        version = sql.cursor(conn).execute("PRAGMA data_version").fetchone()[0]
        if version != self.data_version or len(self.versions) > self.LIMIT:
            self.clear()
            self.data_version = version

    def clear(self) -> None:
        self.data_version = self.last_seq = self.last_hash = None
        self.versions.clear()
        self.summaries.clear()


def now_iso() -> str:
    # isoformat is several times cheaper than strftime, and this runs once per batch.
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


class Writer:
    def __init__(self, engine: Engine, url: str, max_batch: int = MAX_BATCH, mark: Mark | None = None) -> None:
        self._engine = engine
        self._url = url
        # Raised after each commit, outside the database: see store/mark.py.
        self._mark = mark
        # Whether the log was found to hold what the mark names; until then every write checks first.
        self._held = mark is None
        self._max_batch = max_batch
        self._pending: deque[AppendRequest | _Call] = deque()
        self._leader = threading.Lock()
        self._conn: Connection | None = None
        self._closed = False
        self._cache = _Cache()
        self.stats = WriterStats()
        # Leads on behalf of callers that must not block (the event loop): one thread is enough, as
        # only one leader can run at a time anyway.
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentd-writer")

    def submit(self, item: AppendRequest | _Call) -> Future:
        """Queue `item` and lead a commit unless another thread already is; returns its future."""
        future = self.enqueue(item)
        self.lead()
        return future

    def enqueue(self, item: AppendRequest | _Call) -> Future:
        """Queue `item` without leading: for callers that must not block, who then call `lead` elsewhere."""
        if self._closed:
            raise StoreError("the store is closed")
        self._pending.append(item)
        return item.future

    def call(self, fn: Callable[[Connection], Any], *, guarded: bool = True) -> Future:
        """Run `fn(conn)` on the writer's connection inside one write transaction of its own."""
        return self.submit(_Call(fn, guarded))

    def lead_in_background(self) -> None:
        """Make sure someone commits what is queued, without waiting for it here."""
        if not self._leader.locked():
            # If the current leader is just finishing, its re-check of the queue after releasing the
            # lock sees what this caller queued; otherwise the background thread leads.
            self._background.submit(self.lead)

    def lead(self) -> None:
        """Commit what is queued if no other thread is doing so; never waits for the lock.

        The loop re-checks the queue after releasing the lock: a request queued while the lock was
        held, whose own thread therefore did not lead, is committed here.
        """
        while self._pending and self._leader.acquire(blocking=False):
            try:
                while self._pending:
                    self._run_one_batch()
            finally:
                self._leader.release()

    def close(self) -> None:
        self._closed = True
        self._background.shutdown(wait=True)
        with self._leader:
            while self._pending:
                item = self._take()
                if item is not None:
                    item.future.set_exception(StoreError("the store was closed"))
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._mark is not None:
                self._mark.close()

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = self._engine.connect()
        return self._conn

    def _run_one_batch(self) -> None:
        first = self._take()
        if first is None:
            return
        if isinstance(first, _Call):
            self._run_call(first)
            return
        batch = [first]
        while self._pending and len(batch) < self._max_batch and isinstance(self._pending[0], AppendRequest):
            item = self._take()
            if item is not None:
                batch.append(item)
        self._commit(batch)

    def _take(self) -> AppendRequest | _Call | None:
        """The next queued item, marked running so it can no longer be cancelled; None if it was.

        An async appender that is cancelled while its request waits here cancels the request's future
        (asyncio.wrap_future does that): such a request is dropped unwritten, as its caller was told.
        Once running, a future cannot be cancelled, so setting its outcome never fails; a failure there
        would leave every later appender of the batch waiting forever.
        """
        item = self._pending.popleft()
        return item if item.future.set_running_or_notify_cancel() else None

    def _run_call(self, call: _Call) -> None:
        # A bulk operation may write anything; what the cache knew no longer holds.
        self._cache.clear()
        try:
            committed = self._committed() if call.guarded else None
            conn = self._connection()
            with conn.begin():
                if call.guarded:
                    self._hold(conn, committed)
                before = positions.last_seq(conn)
                result = call.fn(conn)
                after = positions.head(conn)
        except BaseException as e:  # noqa: BLE001  the caller's thread decides what to do with it
            call.future.set_exception(self._translated(e))
        else:
            self._raise_mark(*after, restart=before == 0)
            call.future.set_result(result)

    def _committed(self) -> Position | None:
        """What the mark holds, read before the transaction it is held against (see store.mark.committed)."""
        return None if self._held or self._mark is None else self._mark.read()

    def _hold(self, conn: Connection, committed: Position | None) -> None:
        """Refuse to write to a log behind its mark, in db check's line; once it holds, never check again:
        from then on this writer raises the mark itself."""
        if not self._held:
            audit.check_mark(conn, committed)
            self._held = True

    def _raise_mark(self, seq: int, hash: str | None, *, restart: bool) -> None:
        if self._mark is not None:
            self._mark.advance(seq, hash, restart=restart)

    def _commit(self, batch: list[AppendRequest]) -> None:
        try:
            committed = self._committed()
            conn = self._connection()
            with sql.write_transaction(conn):
                self._hold(conn, committed)
                self._cache.check(conn)
                outcomes, learned = _append_batch(conn, batch, self._cache)
            first, head = learned()
            if head[0] >= first:
                self._raise_mark(*head, restart=first == 1)
            self.stats.commits += 1
            self.stats.appends += len(batch)
        except BaseException as e:  # noqa: BLE001  nothing of the batch was committed
            self._cache.clear()
            if len(batch) > 1 and _is_integrity_error(e):
                # A constraint only the database could see (say, an approval id another task already
                # used): commit each request on its own so that only the guilty one fails.
                for req in batch:
                    self._commit([req])
                return
            error = self._translated(e)
            for req in batch:
                req.future.set_exception(error)
            return
        for req, outcome in outcomes:
            if isinstance(outcome, BaseException):
                req.future.set_exception(outcome)
            else:
                req.future.set_result(outcome)

    def _translated(self, e: BaseException) -> BaseException:
        if isinstance(e, AgentdError):
            return e
        if _is_integrity_error(e):
            error = StoreError(f"append refused by the database: {getattr(e, 'orig', e)}")
        elif _is_driver_error(e):
            error = translate(e, self._url)
        else:
            return e
        error.__cause__ = e
        return error


def _append_batch(
    conn: Connection, batch: list[AppendRequest], cache: _Cache
) -> tuple[list[tuple[AppendRequest, Any]], Callable[[], None]]:
    """Check and write one batch; returns each request's outcome, and what to tell the cache once the
    transaction has committed (not before: a rollback must leave the cache as it was)."""
    last, prev = (cache.last_seq, cache.last_hash) if cache.last_seq is not None else positions.head(conn)
    next_seq = first = last + 1
    versions = {
        sid: cache.versions[sid] if sid in cache.versions else log.stream_version(conn, sid)
        for sid in {req.stream_id for req in batch}
    }
    projector = projections.Projector(conn, known=cache.summaries)
    recorded_at = now_iso()
    accepted: list[Recorded] = []
    outcomes: list[tuple[AppendRequest, Any]] = []
    for req in batch:
        try:
            if not req.events:
                raise StoreError(f"nothing to append to {req.stream_id!r}")
            current = versions[req.stream_id]
            if req.expected_version is not None and req.expected_version != current:
                raise ConcurrencyConflict(req.stream_id, req.expected_version, current)
            # tuple.__new__ builds the very tuple Recorded(...) would, without the Python-level __new__ a named
            # tuple runs: a third of the cost, once per event.
            records = [
                _new(Recorded, (next_seq + i, req.stream_id, current + 1 + i, recorded_at, req.actor,
                                req.causation_id, req.correlation_id, event))
                for i, event in enumerate(req.events)
            ]
            projector.stage(records)
        except AgentdError as e:
            outcomes.append((req, e))
            continue
        versions[req.stream_id] = current + len(records)
        next_seq += len(records)
        accepted += records
        outcomes.append((req, records))
    if accepted:
        prev = insert(conn, accepted, prev)
        projector.flush()

    def learned() -> tuple[int, tuple[int, str | None]]:
        """Tell the cache; return the first seq this batch wrote, and the log's last seq and hash."""
        cache.last_seq = next_seq - 1
        cache.last_hash = prev
        cache.versions.update(versions)
        cache.summaries.update(projector.summaries)
        return first, (next_seq - 1, prev)

    return outcomes, learned


def insert(conn: Connection, records: Sequence[Recorded], prev: str | None) -> str:
    """Insert events as rows in table column order, each chained to the one before (`prev`, the hash of
    the log's last row); return the last hash."""
    # What model_dump_json returns, before it decodes the bytes: the chain hashes these bytes, so they are
    # not encoded again, and the keyword handling around the serializer is skipped.
    payloads = [type(r.event).__pydantic_serializer__.to_json(r.event) for r in records]
    # A last row without a hash was written behind the writer's back; db check names it, and the chain
    # goes on from an empty hash rather than refusing every append after it.
    rows = chain.rows(prev or "", records, payloads)
    log.INSERT.insert(conn, rows)
    return rows[-1][-1]


def _is_integrity_error(e: BaseException) -> bool:
    return type(getattr(e, "orig", e)).__name__ == "IntegrityError"


def _is_driver_error(e: BaseException) -> bool:
    return isinstance(e, DBAPIError) or type(e).__module__ in ("sqlite3", "psycopg", "psycopg.errors")

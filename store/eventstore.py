"""The event store: append with optimistic concurrency, read the log, read the projections."""

from __future__ import annotations

import asyncio
import functools
from typing import Sequence

from store import audit, log, loss, migrate, projections
from store.blobs import BlobTable
from store.database import create_engines
from store.errors import StoreError
from store.events import NOTIFICATIONS_STREAM, Event, Recorded
from store.mark import Mark
from store.queries import memories as memory_queries, tasks as task_queries
from store.queries.memories import MemoryRow
from store.reader import reading
from store.state import Approval, TaskState, TaskSummary, fold_all
from store.workers import WorkerTable
from store.writer import AppendRequest, Writer, WriterStats

ANY = None
"""Expected version meaning: append whatever the stream's version is."""
NO_STREAM = 0
"""Expected version meaning: the stream must not exist yet."""


class EventStore:
    """One store per process. Appends go through the single writer; reads use their own connections."""

    def __init__(
        self,
        url: str,
        *,
        synchronous: str = "full",
        busy_timeout_ms: int = 5000,
        upgrade: bool = True,
    ) -> None:
        self.url = url
        self.engines = create_engines(url, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms)
        try:
            if upgrade:
                migrate.upgrade(self.engines)
            else:
                migrate.require_current(self.engines)
        except BaseException:
            self.engines.dispose()
            raise
        self.mark = Mark.beside(url)
        self._writer = Writer(self.engines.write, url, mark=self.mark)

    def close(self) -> None:
        if "workers" in self.__dict__:
            self.workers.close()
        if self.__dict__.get("blobs") is not None:
            self.blobs.close()
        self._writer.close()
        self.engines.dispose()

    @functools.cached_property
    def workers(self) -> WorkerTable:
        """Who serves this database, and which task each of them runs (store/workers.py)."""
        return WorkerTable(self.url, self.in_write_transaction, self.engines.is_sqlite)

    @functools.cached_property
    def blobs(self) -> BlobTable | None:
        """Artifact bytes shared by every host that serves this database (store/blobs.py); None for a
        SQLite file, whose artifacts live beside it on its one host."""
        return None if self.engines.is_sqlite else BlobTable(self.url)

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------

    def submit(
        self,
        stream_id: str,
        events: Sequence[Event],
        *,
        expected_version: int | None = ANY,
        actor: str = "agentd",
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ):
        """Queue an append and return a future of its records; the writer may commit it with others."""
        return self._writer.submit(
            AppendRequest(stream_id, tuple(events), expected_version, actor, causation_id, correlation_id)
        )

    def append(self, stream_id: str, events: Sequence[Event], **kw) -> list[Recorded]:
        """Append events to one stream atomically; raises ConcurrencyConflict if `expected_version` is stale."""
        return self.submit(stream_id, events, **kw).result()

    async def append_async(
        self,
        stream_id: str,
        events: Sequence[Event],
        *,
        expected_version: int | None = ANY,
        actor: str = "agentd",
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> list[Recorded]:
        """Append without blocking the event loop: the commit runs in the writer's background thread,
        together with whatever else was queued meanwhile."""
        future = self._writer.enqueue(
            AppendRequest(stream_id, tuple(events), expected_version, actor, causation_id, correlation_id)
        )
        self._writer.lead_in_background()
        return await asyncio.wrap_future(future)

    @property
    def writer_stats(self) -> WriterStats:
        return self._writer.stats

    def in_write_transaction(self, fn):
        """Run `fn(conn)` in the writer's thread in a write transaction of its own (bulk operations)."""
        return self._writer.call(fn).result()

    def check_sound(self, *, quick: bool = True) -> None:
        """Refuse, in the line `agentd db check` gives, a database whose pages SQLite finds damaged or whose
        log is behind its mark: what a daemon must know before it writes for hours. The log is not read
        whole: its chain is `db check`'s to verify."""
        committed = None if self.mark is None else self.mark.read()
        with self.reading() as conn:
            audit.check_integrity(conn, quick=quick)
            audit.check_mark(conn, committed)

    def accept_loss(self, by: str) -> loss.Loss:
        """Take a log behind its mark as it is: record the loss, then set the mark to the log."""
        if self.mark is None:
            raise StoreError("nothing to accept: only a SQLite file keeps a high-water mark, and this is not one")
        mark = self.mark
        return self._writer.call(lambda conn: loss.accept(conn, mark, by), guarded=False).result()

    # -- reading ---------------------------------------------------------------------------------

    def reading(self):
        """A read connection in one transaction: every query in the block sees the same snapshot."""
        return reading(self.url, self.engines)

    def last_seq(self) -> int:
        with self.reading() as conn:
            return log.last_seq(conn)

    def stream_version(self, stream_id: str) -> int:
        with self.reading() as conn:
            return log.stream_version(conn, stream_id)

    def read_stream(self, stream_id: str, until: int | None = None, after: int = 0) -> list[Recorded]:
        """The stream's events in order, those with seq in (after, until]."""
        with self.reading() as conn:
            return list(log.iter_records(conn, stream_id=stream_id, until=until, after=after))

    def task(self, task_id: str) -> TaskState | None:
        """The task as the projection holds it now."""
        with self.reading() as conn:
            return projections.load_task(conn, task_id)

    def task_at(self, task_id: str, until: int) -> TaskState | None:
        """The task as it was when event `until` had just been recorded, folded from the log."""
        with self.reading() as conn:
            records = log.iter_records(conn, stream_id=(task_id, NOTIFICATIONS_STREAM), until=until)
            return fold_all(records, only=task_id).states().get(task_id)

    def approval(self, approval_id: str) -> tuple[str, Approval] | None:
        with self.reading() as conn:
            return projections.load_approval(conn, approval_id)

    def approvals(self, status: str | None = "pending") -> list[tuple[str, Approval]]:
        with self.reading() as conn:
            return projections.list_approvals(conn, status)

    def memories(self, *, subject: str | None = None, tenant: str | None = None) -> list[MemoryRow]:
        """The memories the projection holds, of `subject` and `tenant` where given, in recorded order."""
        with self.reading() as conn:
            return memory_queries.listed(conn, subject=subject, tenant=tenant)

    def tasks(self, phase: str | None = None) -> list[TaskSummary]:
        with self.reading() as conn:
            return task_queries.summaries(conn, phase=phase)

"""Spans live: the daemon follows the log and hands each task's spans to the sink as they end.

It reads the log, never the loop's memory, so what it sends is what `agentd trace export` derives
from the same events later, ids and all. It starts at the log's end when the daemon starts; earlier
tasks are exported on request.
"""

from __future__ import annotations

import anyio
from anyio import to_thread

from runtime import logs
from runtime.trace.span import task_spans
from store import EventStore, log
from store.events import TaskSubmitted

POLL_S = 0.5

_log = logs.get_logger("agentd.trace")


class Follower:
    def __init__(self, store: EventStore, sink) -> None:
        self.store = store
        self.sink = sink
        self._seen = store.last_seq()
        # The spans sent per task: a task that goes on after an answer sends only its new ones.
        self._sent: dict[str, set[str]] = {}
        # Streams that are not tasks (the notification queue, schedules): read once, then skipped.
        self._not_tasks: set[str] = set()

    def poll(self) -> int:
        """Send the spans that ended since the last poll; how many were sent."""
        with self.store.reading() as conn:
            fresh = list(log.iter_raw(conn, after=self._seen, stream_id=None, types=()))
        if not fresh:
            return 0
        self._seen = fresh[-1].seq
        sent = 0
        for stream_id in dict.fromkeys(r.stream_id for r in fresh):
            if stream_id in self._not_tasks:
                continue
            records = self.store.read_stream(stream_id)
            if not records or not isinstance(records[0].event, TaskSubmitted):
                self._not_tasks.add(stream_id)
                continue
            done = self._sent.setdefault(stream_id, set())
            new = [s for s in task_spans(stream_id, records) if s.span_id not in done]
            self.sink.emit(new)
            done.update(s.span_id for s in new)
            sent += len(new)
        return sent

    async def run(self) -> None:
        while True:
            try:
                await to_thread.run_sync(self.poll)
            except Exception as e:  # noqa: BLE001  a trace is worth less than the daemon: log it and go on
                _log.warning("trace.poll_failed", error=str(e))
            await anyio.sleep(POLL_S)

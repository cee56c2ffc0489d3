"""Where spans go: an OTLP/HTTP collector when `otlp_endpoint` is set, JSON lines otherwise.

Both sit behind the SDK's batch processor: a bounded queue drained on its own thread, so the daemon
hands a span over and goes on; when the queue is full the span is dropped, never the append waited for.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from runtime.trace.span import Span

QUEUE_SPANS = 4096
# In the data folder, where no collector is configured.
TRACES_FILE = "traces.jsonl"
# Not Resource.create: its detectors add a random instance id per process, and the same log must give
# the same spans in any process.
RESOURCE = Resource({"service.name": "agentd"})
SCOPE = InstrumentationScope("agentd")


def readable(span: Span) -> ReadableSpan:
    """One span as the SDK's exporters take it, with its own ids and times, not the SDK's."""

    def context(span_id: str) -> SpanContext:
        return SpanContext(int(span.trace_id, 16), int(span_id, 16), is_remote=False,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))

    return ReadableSpan(
        name=span.name, context=context(span.span_id),
        parent=context(span.parent_id) if span.parent_id else None,
        resource=RESOURCE, attributes=span.attributes, instrumentation_scope=SCOPE,
        kind=SpanKind.CLIENT if span.kind == "client" else SpanKind.INTERNAL,
        status=Status(StatusCode.ERROR, span.error) if span.error else Status(StatusCode.OK),
        start_time=_ns(span.start), end_time=_ns(span.end),
    )


class JsonLines(SpanExporter):
    """Spans as one JSON object per line, in OpenTelemetry's own JSON shape, to a file or a stream."""

    def __init__(self, out: Path | IO[str]) -> None:
        self._path = out if isinstance(out, Path) else None
        self._stream = None if isinstance(out, Path) else out
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(json.loads(s.to_json()), separators=(",", ":")) + "\n" for s in spans)
        with self._lock:
            if self._path is not None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                with self._path.open("a", encoding="utf-8") as f:
                    f.write(lines)
            else:
                self._stream.write(lines)
                self._stream.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def exporter(otlp_endpoint: str | None, file: Path | IO[str]) -> SpanExporter:
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/traces", timeout=10)
    return JsonLines(file)


class Sink:
    """Spans handed to the batch processor, from any thread; `close` sends what is queued."""

    def __init__(self, target: SpanExporter) -> None:
        self._processor = BatchSpanProcessor(target, max_queue_size=QUEUE_SPANS, schedule_delay_millis=500)

    def emit(self, spans: Iterable[Span]) -> None:
        for span in spans:
            self._processor.on_end(readable(span))

    def close(self) -> None:
        self._processor.shutdown()


def send(spans: Sequence[Span], target: SpanExporter) -> bool:
    """Spans sent now, all at once (for `agentd trace export`); whether the exporter took them."""
    try:
        return target.export([readable(s) for s in spans]) == SpanExportResult.SUCCESS
    finally:
        target.shutdown()


def _ns(t) -> int:
    return int(t.timestamp() * 1_000_000_000)

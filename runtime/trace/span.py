"""A task's spans, derived from its events alone: the same spans, with the same ids, whether they are
made live as events are appended, from a past task, or from a replayed or imported log.

The tree follows OpenTelemetry's GenAI agent conventions: `invoke_agent` for the task; under it one
span per decision; under each decision its model calls (`chat`), its tool call (`execute_tool`), the
wait for a person's approval, skills it loaded and compactions. Ids are hashes of the task id and the
event that opens each span, so two derivations of one log agree span for span.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from store.events import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ContextCompacted,
    McpToolsPinned,
    ModelCalled,
    Recorded,
    SkillActivated,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallStarted,
)


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str | None
    start: datetime
    end: datetime
    kind: Literal["internal", "client"] = "internal"
    error: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


def trace_id(task_id: str) -> str:
    return hashlib.sha256(f"trace:{task_id}".encode()).hexdigest()[:32]


def span_id(task_id: str, key: str) -> str:
    return hashlib.sha256(f"span:{task_id}:{key}".encode()).hexdigest()[:16]


def task_spans(task_id: str, records: Sequence[Recorded]) -> list[Span]:
    """Every span of the task that has ended by its last event, parents before children. The task's own
    span ends with its last phase change to a finished phase; an unfinished task has none yet."""
    records = [r for r in records if r.stream_id == task_id]
    if not records or not isinstance(records[0].event, TaskSubmitted):
        return []
    trace = trace_id(task_id)
    root = span_id(task_id, "task")
    submitted: TaskSubmitted = records[0].event
    at = {r.seq: _time(r) for r in records}
    # A decision opens with its first model call (its start is the call's end less its own seconds)
    # and lasts until the next decision opens, or the task ends.
    opens: dict[int, datetime] = {}
    for r in records:
        if isinstance(r.event, ModelCalled) and r.event.call_index not in opens:
            opens[r.event.call_index] = _time(r) - timedelta(seconds=r.event.ttft_s + r.event.generation_s)
    mcp_servers = {t.name: t.server for r in records if isinstance(r.event, McpToolsPinned) for t in r.event.tools}
    end = next((at[r.seq] for r in reversed(records) if isinstance(r.event, TaskPhaseChanged)
                and TaskPhase(r.event.phase).finished), None)
    final_phase = next((r.event.phase for r in reversed(records) if isinstance(r.event, TaskPhaseChanged)), None)

    def decision(index: int) -> str:
        return span_id(task_id, f"decision:{index}") if index in opens else root

    spans: list[Span] = []
    if end is not None:
        phase = TaskPhase(final_phase)
        spans.append(Span(
            f"invoke_agent {submitted.profile}", trace, root, None, _time(records[0]), end,
            error=None if phase == TaskPhase.COMPLETED else phase.value,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": submitted.profile,
                        "gen_ai.conversation.id": task_id, "agentd.task.phase": phase.value,
                        "agentd.tenant": submitted.tenant},
        ))
    ordered = sorted(opens.items())
    for i, (index, opened) in enumerate(ordered):
        closes = ordered[i + 1][1] if i + 1 < len(ordered) else end
        if closes is not None:
            spans.append(Span(f"decision {index}", trace, decision(index), root, opened, max(closes, opened),
                              attributes={"agentd.call_index": index}))

    started: dict[str, Recorded] = {}
    requested: dict[str, Recorded] = {}
    for r in records:
        e = r.event
        if isinstance(e, ModelCalled):
            attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": e.model,
                          "gen_ai.usage.input_tokens": e.prompt_tokens,
                          "gen_ai.usage.output_tokens": e.completion_tokens,
                          "agentd.attempt": e.attempt, "agentd.ttft_s": e.ttft_s, "agentd.decision": e.decision}
            if e.cached_tokens is not None:
                attributes["gen_ai.usage.cache_read.input_tokens"] = e.cached_tokens
            spans.append(Span(
                f"chat {e.model}", trace, span_id(task_id, f"chat:{e.call_index}:{e.attempt}:{r.seq}"),
                decision(e.call_index), at[r.seq] - timedelta(seconds=e.ttft_s + e.generation_s), at[r.seq],
                kind="client", attributes=attributes,
            ))
        elif isinstance(e, ToolCallStarted):
            started[e.call_id] = r
        elif isinstance(e, ToolCallExecuted):
            begun = started.get(e.call_id, r)
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": e.tool,
                          "gen_ai.tool.call.id": e.call_id, "agentd.tool.status": e.status,
                          "agentd.tool.attempts": e.attempts}
            if e.tool in mcp_servers:
                attributes["agentd.mcp.server"] = mcp_servers[e.tool]
            spans.append(Span(
                f"execute_tool {e.tool}", trace, span_id(task_id, f"tool:{e.call_id}"), decision(_index(e.call_id)),
                at[begun.seq], at[r.seq], error=None if e.status == "ok" else e.status, attributes=attributes,
            ))
        elif isinstance(e, ApprovalRequested):
            requested[e.approval_id] = r
        elif isinstance(e, ApprovalGranted | ApprovalDenied) and e.approval_id in requested:
            asked = requested[e.approval_id].event
            granted = isinstance(e, ApprovalGranted)
            spans.append(Span(
                f"approval {asked.tool}", trace, span_id(task_id, f"approval:{e.approval_id}"),
                decision(_index(asked.call_id)), at[requested[e.approval_id].seq], at[r.seq],
                error=None if granted else "denied",
                attributes={"agentd.approval.id": e.approval_id, "agentd.approval.decision":
                            "granted" if granted else "denied", "agentd.approval.by": e.by,
                            "gen_ai.tool.name": asked.tool},
            ))
        elif isinstance(e, SkillActivated):
            spans.append(Span(
                f"load_skill {e.name}", trace, span_id(task_id, f"skill:{r.seq}"), decision(e.call_index),
                at[r.seq], at[r.seq], attributes={"agentd.skill.name": e.name, "agentd.skill.hash": e.content_hash,
                                                  "agentd.skill.by": e.by},
            ))
        elif isinstance(e, ContextCompacted):
            spans.append(Span(
                "compact_context", trace, span_id(task_id, f"compact:{r.seq}"), decision(e.call_index),
                at[r.seq], at[r.seq], attributes={"agentd.compacted.first_seq": e.first_seq,
                                                  "agentd.compacted.last_seq": e.last_seq},
            ))
    return spans


def _index(call_id: str) -> int:
    """A call id (`c3`) names the decision that proposed it."""
    digits = call_id.lstrip("c")
    return int(digits) if digits.isdigit() else 0


def _time(r: Recorded) -> datetime:
    return datetime.fromisoformat(r.recorded_at)

"""What the web page shows, shaped from one read snapshot of the store: approvals, tasks, manifests, the log."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from runtime.agent.accounting import Accounting, account
from runtime.agent.loop import arguments_hash
from runtime.agent.progress import Board, Progress, line
from runtime.artifacts import ArtifactStore
from runtime.errors import InvalidCommand
from runtime.harness import tasks, timeline, undo
from runtime.tools import ToolRegistry
from runtime.tools.changes import Kind
from runtime.web import changes
from store import EventStore, log, projections, workers
from store.events import (
    MCP_TOOLS_STREAM,
    NOTIFICATIONS_STREAM,
    SCHEDULES_STREAM,
    AnswerGiven,
    ApprovalRequested,
    ModelCalled,
    Recorded,
    TaskEscalated,
    TaskPhase,
    TaskPhaseChanged,
    ToolCallProposed,
)
from store.queries.approvals import count_pending, recently_decided
from store.queries.tasks import newest_summaries
from store.state import Approval, TaskSummary

TASKS_SHOWN = 500
RECENT_DECISIONS = 10
PAYLOAD_CHARS = 2_000
EVENTS_LIMIT_MAX = 500
SYSTEM_STREAMS = frozenset({NOTIFICATIONS_STREAM, SCHEDULES_STREAM, MCP_TOOLS_STREAM})


# -- formatting shared by every page -------------------------------------------------------------


def parse_time(iso: str) -> datetime:
    moment = datetime.fromisoformat(iso)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def utc(iso: str | None) -> str:
    """A stored timestamp as a person reads it: to the second, in UTC."""
    if not iso:
        return ""
    return parse_time(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def span(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 60:
        return f"{int(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
    return f"{int(seconds // 86400)} d"


def ago(iso: str | None, now: datetime | None = None) -> str:
    if not iso:
        return ""
    seconds = ((now or datetime.now(UTC)) - parse_time(iso)).total_seconds()
    return "just now" if seconds < 5 else f"{span(seconds)} ago"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def cut(text: str, limit: int) -> tuple[str, str | None]:
    """The text, or its start and a note saying how much was left out: pages stay small whatever a tool said."""
    if len(text) <= limit:
        return text, None
    return text[:limit], f"cut: the first {limit:,} of {len(text):,} characters shown"


def frame(conn: Connection) -> dict[str, Any]:
    """What every page carries: the pending count for the navigation and the snapshot's last seq."""
    return {"pending": count_pending(conn), "last_seq": log.last_seq(conn)}


# -- approvals -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Contract:
    effects: str
    idempotent: bool
    scope: str
    description: str


@dataclass(frozen=True)
class Pending:
    approval: Approval
    task_id: str
    goal: str
    arguments: str
    shown_hash: str
    model_reason: str
    contract: Contract | None
    policy_version: str | None
    requested_at: str
    expires_at: str | None
    expires_in: str | None
    expired: bool
    call_index: int | None
    # The diff the call would make, for a task that confirms its changes; file text, shown escaped.
    preview: str | None = None


def approvals_page(store: EventStore, tools: ToolRegistry | None, done: str | None = None) -> dict[str, Any]:
    now = datetime.now(UTC)
    with store.reading() as conn:
        pending = [
            _pending(conn, task_id, a, tools, now) for task_id, a in projections.list_approvals(conn, "pending")
        ]
        flash = None
        if done:
            found = projections.load_approval(conn, done)
            if found is not None and found[1].status != "pending":
                a = found[1]
                flash = f"{a.approval_id} ({a.tool}) was {a.status} by {a.decided_by}."
        decided = recently_decided(conn, RECENT_DECISIONS)
        return {**frame(conn), "approvals": pending, "decided": decided, "flash": flash}


def changed_tools(pending: list) -> list[dict[str, str]]:
    """The MCP tools held back for a person's consent (runtime.mcp.consent.Changed), as the page shows them."""
    return [
        {"server": c.server, "name": c.name, "diff": c.diff(), "sha256": c.listed.sha256,
         "accepted": c.accepted.sha256[:12], "listed": c.listed.sha256[:12]}
        for c in pending
    ]


def _pending(conn: Connection, task_id: str, a: Approval, tools: ToolRegistry | None, now: datetime) -> Pending:
    proposed: ToolCallProposed | None = None
    requested: ApprovalRequested | None = None
    requested_at = ""
    for rec in log.iter_records(conn, stream_id=task_id, types=("ToolCallProposed", "ApprovalRequested")):
        e = rec.event
        if isinstance(e, ToolCallProposed) and e.call_id == a.call_id and rec.seq < a.requested_seq:
            proposed = e
        elif isinstance(e, ApprovalRequested) and e.approval_id == a.approval_id:
            requested, requested_at = e, rec.recorded_at
    summary = projections.load_summary(conn, task_id)
    arguments = proposed.arguments if proposed is not None else {}
    expires = parse_time(a.expires_at) if a.expires_at else None
    return Pending(
        approval=a,
        task_id=task_id,
        goal=summary.goal if summary else "",
        arguments=pretty(arguments),
        # The hash of what this page shows, not of what the approval says: if they ever differ,
        # the decision is refused rather than applied to arguments nobody saw.
        shown_hash=arguments_hash(arguments),
        model_reason=proposed.reason if proposed is not None else "",
        contract=_contract(tools, a.tool),
        policy_version=requested.policy_version if requested is not None else None,
        requested_at=requested_at,
        expires_at=a.expires_at,
        expires_in=None if expires is None else span((expires - now).total_seconds()),
        expired=expires is not None and expires <= now,
        call_index=call_index(a.call_id),
        preview=requested.preview if requested is not None else None,
    )


def _contract(tools: ToolRegistry | None, name: str) -> Contract | None:
    if tools is None or name not in tools:
        return None
    c = tools.get(name).contract
    return Contract(
        effects=", ".join(e.value for e in c.effects) or "none (it only computes)",
        idempotent=c.idempotent,
        scope=c.scope,
        description=c.description,
    )


def call_index(call_id: str) -> int | None:
    """The decision that proposed a call: call ids are "c" and the call index."""
    digits = call_id[1:] if call_id.startswith("c") else ""
    return int(digits) if digits.isdigit() else None


# -- tasks ---------------------------------------------------------------------------------------


def tasks_page(store: EventStore) -> dict[str, Any]:
    with store.reading() as conn:
        # One more than shown, to know whether there are more.
        summaries = newest_summaries(conn, TASKS_SHOWN + 1)
        return {**frame(conn), "tasks": summaries[:TASKS_SHOWN], "more": len(summaries) > TASKS_SHOWN,
                "shown": TASKS_SHOWN, "holders": holders(conn)}


def holders(conn: Connection) -> dict[str, str] | None:
    """The worker running each task, where several serve the database (any worker's page shows them
    all); None where one does, which the page then does not mention."""
    now, found, held = workers.snapshot(conn)
    if sum(w.stopped_at is None for w in found) < 2:
        return None
    return {lease.task_id: lease.worker_id for lease in held if lease.expires_at > now}


@dataclass(frozen=True)
class CallRow:
    call_index: int
    attempt: int
    decision: str
    prompt_tokens: int
    cached_tokens: int | None
    completion_tokens: int
    buckets: Any


@dataclass(frozen=True)
class Now:
    """What a task that has not finished is doing at this moment, from the daemon's progress board."""

    line: str
    idle: str  # what to say when the board has nothing for the task: between decisions, or waiting
    done: int
    total: int
    bar: bool  # a count towards a known end: prompt evaluation, generation


IDLE = {
    TaskPhase.SUBMITTED: "waiting to start",
    TaskPhase.RUNNING: "between decisions",
    TaskPhase.AWAITING_APPROVAL: "waiting for approval",
    TaskPhase.WAITING_FOR_USER: "waiting for your message",
}


def now(summary: TaskSummary, progress: Progress | None) -> Now | None:
    """None for a finished task: there is nothing it is doing."""
    idle = IDLE.get(TaskPhase(summary.phase))
    if idle is None:
        return None
    if progress is None:
        return Now(idle, idle, 0, 0, False)
    return Now(line(progress), idle, progress.done, progress.total, progress.stage in ("evaluating", "generating"))


def progress_json(latest: dict[str, Progress]) -> dict[str, dict[str, Any]]:
    """The board as the page's live script reads it: per task, its line and where its bar stands."""
    return {
        task_id: {"line": line(p), "stage": p.stage, "step": p.step, "done": p.done, "total": p.total,
                  "bar": p.stage in ("evaluating", "generating")}
        for task_id, p in latest.items()
    }


def task_page(
    store: EventStore, task_id: str, board: Board | None = None, artifacts: ArtifactStore | None = None,
    done: str | None = None,
) -> dict[str, Any] | None:
    """`board` is the daemon's progress board; without one (no daemon here) the page says nothing of now.
    `artifacts` is where the files' contents are kept; without it the page lists changed files, no diffs.
    `done` names the undo or redo just made here, which the page reports at its top."""
    with store.reading() as conn:
        state = projections.load_task(conn, task_id)
        if state is None:
            return None
        records = list(log.iter_records(conn, stream_id=task_id))
        context = frame(conn)
    calls = [
        CallRow(e.call_index, e.attempt, e.decision, e.prompt_tokens, e.cached_tokens, e.completion_tokens,
                e.manifest.buckets if e.manifest else None)
        for e in (r.event for r in records)
        if isinstance(e, ModelCalled)
    ]
    tokens = account(records)
    phase = TaskPhase(state.summary.phase)
    return {
        **context, "state": state, "s": state.summary, "entries": timeline.entries(records), "calls": calls,
        "now": now(state.summary, board.get(task_id)) if board is not None else None,
        "takes_messages": takes_messages(records),
        "tokens": tokens, "chart": token_chart(tokens, CHART_WIDTH, CHART_HEIGHT) if tokens.calls else None,
        "outcome": outcome(records), "changes": changes.of_task(records, artifacts),
        # As `restore` rules: a task still deciding may change its files again.
        "restorable": artifacts is not None and phase not in (TaskPhase.SUBMITTED, TaskPhase.RUNNING),
        "flash": changes.done_line(records, done) if done else None,
    }


@dataclass(frozen=True)
class Outcome:
    """How the task ended, or what it waits for, as the top of its page says it."""

    kind: str  # "answer", "escalated", "failed", "cancelled", "waiting"
    label: str
    text: str
    sources: tuple[str, ...] = ()


def outcome(records: list[Recorded]) -> Outcome | None:
    """The task's answer or escalation, why it failed or was cancelled, or what approval it waits for;
    None while it runs, since a wait or a failure before its last phase is over. As `task show` says it."""
    for rec in reversed(records):
        e = rec.event
        if isinstance(e, AnswerGiven):
            return Outcome("answer", "Answer", e.answer, e.sources)
        if isinstance(e, TaskEscalated):
            return Outcome("escalated", "Escalated", e.reason)
        if isinstance(e, TaskPhaseChanged):
            if e.phase == TaskPhase.FAILED:
                return Outcome("failed", "Failed", e.reason)
            if e.phase == TaskPhase.CANCELLED:
                return Outcome("cancelled", "Cancelled", e.reason)
            if e.phase == TaskPhase.AWAITING_APPROVAL:
                return Outcome("waiting", "Waiting", e.reason or "for an approval")
            if e.phase not in (TaskPhase.COMPLETED, TaskPhase.WAITING_FOR_USER):
                # The answer or escalation comes just before the phase that follows it.
                return None
    return None


def restore_page(
    store: EventStore, artifacts: ArtifactStore, task_id: str, kind: Kind, only: str | None
) -> dict[str, Any]:
    """What an undo (or redo) would do, asked of the restore itself with nothing written, for a person to
    confirm. Raises what the restore would: NotFound, ChangedSince, InvalidCommand."""
    _, summary = undo.load(store, task_id)
    planned = undo.restore(store, artifacts, task_id, kind, by="page", only=only, dry_run=True)
    with store.reading() as conn:
        context = frame(conn)
    return {
        **context, "s": summary, "kind": kind, "only": only,
        # The confirmation holds for the task as shown: anything it records meanwhile asks for a new look.
        "version": summary.version,
        "files": [(r, changes.verb(r), d) for r, d in changes.of_restores(artifacts, planned.restores)],
    }


# The chart's own units: the page scales it to its width, so these only set its proportions.
CHART_WIDTH = 640
CHART_HEIGHT = 200
CHART_TOP = 18  # room above the highest line for its label
BUCKETS = ("system", "tool_definitions", "tool_results", "conversation")


def token_chart(a: Accounting, width: float, height: float) -> dict[str, Any]:
    """Where the chart's shapes go: per call a bar of its buckets stacked from the bottom, scaled to the
    largest request; and the running totals billed and evaluated as lines on a scale of their own, so
    a long task's totals do not flatten its bars."""
    plot = height - CHART_TOP
    slot = width / max(len(a.calls), 1)
    bar_scale = plot / max(max((c.total for c in a.calls), default=0), 1)
    line_scale = plot / max(a.billed, a.evaluated, 1)
    bars = []
    for i, c in enumerate(a.calls):
        # A call without a manifest has only its total: shown whole, as not measured.
        parts = [(b, getattr(c, b)) for b in BUCKETS]
        parts.append(("unmeasured", max(c.total - sum(v for _, v in parts), 0)))
        rects, y = [], height
        for bucket, value in parts:
            if value:
                h = value * bar_scale
                y -= h
                rects.append({"bucket": bucket, "x": round(i * slot + slot * 0.15, 1), "y": round(y, 1),
                              "width": round(slot * 0.7, 1), "height": round(h, 1)})
        bars.append({"call": c, "rects": rects})

    def line(running: list[int]) -> list[tuple[float, float]]:
        # From nothing at the left edge to each call's running total above the middle of its bar.
        return [(0, height)] + [
            (round((i + 0.5) * slot, 1), round(height - v * line_scale, 1)) for i, v in enumerate(running)
        ]

    billed, evaluated = line([c.billed for c in a.calls]), line([c.evaluated for c in a.calls])
    # Evaluated is at most billed: its label goes under its line, billed's over, so the two never overlap.
    labels = [
        {"line": "billed", "value": a.billed, "x": width, "y": round(billed[-1][1] - 4, 1)},
        {"line": "evaluated", "value": a.evaluated, "x": width,
         "y": round(min(evaluated[-1][1] + 14, height - 2), 1)},
    ]
    unmeasured = any(r["bucket"] == "unmeasured" for bar in bars for r in bar["rects"])
    return {"width": width, "height": height, "bars": bars, "billed": billed, "evaluated": evaluated,
            "labels": labels, "legend": BUCKETS + (("unmeasured",) if unmeasured else ())}


def takes_messages(records: list[Recorded]) -> bool:
    """Whether the task would take a message now; asked of `say` itself, so the form and the rule agree."""
    try:
        tasks.say(records, "?")
    except InvalidCommand:
        return False
    return True


def manifest_page(store: EventStore, task_id: str, index: int, attempt: int | None) -> dict[str, Any] | None:
    with store.reading() as conn:
        if projections.load_summary(conn, task_id) is None:
            return None
        calls = [
            r.event for r in log.iter_records(conn, stream_id=task_id, types=("ModelCalled",))
            if r.event.call_index == index
        ]
        context = frame(conn)
    attempts = sorted({c.attempt for c in calls})
    chosen = [c for c in calls if c.attempt == (attempt if attempt is not None else (attempts or [0])[-1])]
    if not chosen or chosen[-1].manifest is None:
        return None
    call = chosen[-1]
    return {**context, "task_id": task_id, "call": call, "m": call.manifest, "attempts": attempts}


# -- the log -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogRow:
    seq: int
    recorded_at: str
    stream_id: str
    is_task: bool
    type: str
    actor: str
    payload: str
    note: str | None


def events_page(
    store: EventStore, *, task: str | None, type_: str | None, before: int | None, limit: int
) -> dict[str, Any]:
    """One page of the log, newest first; SQL does the limit, so a page costs the same at any log size."""
    with store.reading() as conn:
        raws = list(
            log.iter_raw(
                conn, stream_id=task or None, types=(type_,) if type_ else (),
                until=before - 1 if before else None, limit=limit + 1, descending=True,
            )
        )
        context = frame(conn)
    rows = [_log_row(r) for r in raws[:limit]]
    older = rows[-1].seq if len(raws) > limit else None
    return {**context, "rows": rows, "older": older}


def _log_row(r: log.RawEvent) -> LogRow:
    try:
        text = pretty(json.loads(r.payload))
    except ValueError:
        text = r.payload
    payload, note = cut(text, PAYLOAD_CHARS)
    return LogRow(r.seq, r.recorded_at, r.stream_id, r.stream_id not in SYSTEM_STREAMS, r.type, r.actor, payload, note)

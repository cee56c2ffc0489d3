"""A task's timeline: each event of its stream as one line a person can read, with the detail behind it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from store.events import (
    AnswerGiven,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ArtifactDeleted,
    ArtifactRead,
    ArtifactWritten,
    CompactionFailed,
    ContextCompacted,
    ContextTrimmed,
    EvidenceRetrieved,
    FileChanged,
    FileRestored,
    JobFinished,
    JobStarted,
    McpToolsPinned,
    ModelCalled,
    NoteTaken,
    NotificationsAdmitted,
    ProposalAccepted,
    ProposalRejected,
    Recorded,
    RestoreFinished,
    RestoreStarted,
    RunInterrupted,
    SkillActivated,
    SkillActivationFailed,
    SkillCatalogPinned,
    TaskEscalated,
    TaskPhaseChanged,
    TaskSubmitted,
    TestsRan,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
    UserSaid,
)

DETAIL_CHARS = 4_000


@dataclass(frozen=True)
class Entry:
    seq: int
    recorded_at: str
    actor: str
    kind: str
    title: str
    detail: str | None = None
    note: str | None = None
    manifest: tuple[int, int] | None = None  # (call index, attempt) of a model call


def entries(records: Sequence[Recorded]) -> list[Entry]:
    out = []
    for rec in records:
        describe = _DESCRIBE.get(type(rec.event))
        if describe is None:
            kind, title, detail = "other", rec.type, _json(rec.event.model_dump(mode="json"))
        else:
            kind, title, detail = describe(rec.event)
        manifest = (rec.event.call_index, rec.event.attempt) if isinstance(rec.event, ModelCalled) else None
        shown, note = _cut(detail)
        out.append(Entry(rec.seq, rec.recorded_at, rec.actor, kind, title, shown, note, manifest))
    return out


def _cut(text: str | None) -> tuple[str | None, str | None]:
    if text is None or len(text) <= DETAIL_CHARS:
        return text, None
    return text[:DETAIL_CHARS], f"cut: the first {DETAIL_CHARS:,} of {len(text):,} characters shown"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _model_called(e: ModelCalled) -> tuple[str, str, str | None]:
    reuse = "" if e.cached_tokens is None else f", {e.cached_tokens} reused from the cache"
    broke = f"; prefix changed at {e.prefix_break}" if e.prefix_break else ""
    title = (
        f"decision {e.call_index} ({e.decision}), attempt {e.attempt}: "
        f"{e.prompt_tokens} prompt tokens{reuse}, {e.completion_tokens} out{broke}"
    )
    return "decision", title, e.output or None


def _admitted(e: NotificationsAdmitted) -> tuple[str, str, str | None]:
    lines = [
        f"{i.source}/{i.kind}: {i.text}" + (f" (coalesced {len(i.coalesced)})" if i.coalesced else "") for i in e.items
    ]
    return "notification", f"{len(e.items)} notification(s) admitted into call {e.call_index}", "\n".join(lines)


def _executed(e: ToolCallExecuted) -> tuple[str, str, str | None]:
    ref = f", output in {e.artifact_ref}" if e.artifact_ref else ""
    title = f"{e.tool} {e.status} ({e.call_id}, {e.attempts} attempt(s), {e.elapsed_s:.2f} s{ref})"
    return "tool", title, _json(e.observation)


def _proposed(e: ToolCallProposed) -> tuple[str, str, str | None]:
    reason = f"\n\nreason: {e.reason}" if e.reason else ""
    return "tool", f"{e.tool} proposed ({e.call_id})", _json(e.arguments) + reason


def _catalog(e: SkillCatalogPinned) -> tuple[str, str, str | None]:
    names = ", ".join(entry.name for entry in e.entries)
    return "skill", f"skill catalog pinned: {len(e.entries)} skill(s)", names or None


def _mcp_pinned(e: McpToolsPinned) -> tuple[str, str, str | None]:
    lines = [f"{t.server}/{t.name} {t.sha256[:12]} ({','.join(t.effects)}{', approval' if t.needs_approval else ''})"
             for t in e.tools]
    return "tool", f"MCP tools pinned: {len(e.tools)} tool(s)", "\n".join(lines) or None


_DESCRIBE: dict[type, Callable[[Any], tuple[str, str, str | None]]] = {
    TaskSubmitted: lambda e: ("phase", f"submitted (profile {e.profile}, tenant {e.tenant})", e.goal),
    TaskPhaseChanged: lambda e: ("phase", f"phase: {e.phase.value}", e.reason or None),
    UserSaid: lambda e: ("user", "the user said", e.text),
    RunInterrupted: lambda e: ("run", "run interrupted", e.reason),
    ModelCalled: _model_called,
    ProposalAccepted: lambda e: ("proposal", f"proposal of call {e.call_index} accepted", _json(e.action)),
    ProposalRejected: lambda e: ("refusal", f"proposal of call {e.call_index} rejected (attempt {e.attempt})", e.error),
    EvidenceRetrieved: lambda e: (
        "evidence", f"{len(e.items)} evidence item(s) for call {e.call_index}, {len(e.left_out)} left out",
        "\n".join([*(f"{i.cite} {i.source} ({i.tokens} tokens)" for i in e.items),
                   *(f"left out: {o.source}: {o.reason}" for o in e.left_out)]) or None,
    ),
    ToolCallProposed: _proposed,
    ToolCallStarted: lambda e: (
        "tool", f"{e.tool} started ({e.call_id}, {'idempotent' if e.idempotent else 'not idempotent'})", None
    ),
    ToolCallExecuted: _executed,
    NotificationsAdmitted: _admitted,
    ContextTrimmed: lambda e: (
        "evidence", f"history cut for call {e.call_index}: {e.elided} result(s) elided, {e.dropped} step(s) dropped",
        f"{e.tokens_before} tokens before, {e.tokens_after} after, budget {e.budget}",
    ),
    ContextCompacted: lambda e: (
        "evidence", f"history compacted for call {e.call_index}: steps through {e.through_call} summarized "
        f"(events {e.first_seq}-{e.last_seq})",
        f"{e.tokens_before} tokens before, {e.tokens_after} after, budget {e.budget}; the summarizer read "
        f"{e.prompt_tokens} tokens and wrote {e.completion_tokens} ({e.attempts} attempt(s))\n\n"
        + "\n".join(f"{k}: {v}" for k, v in e.sections.items()),
    ),
    CompactionFailed: lambda e: ("refusal", f"compaction for call {e.call_index} failed", e.error),
    NoteTaken: lambda e: (
        "evidence", f"note of {e.message} for call {e.call_index}: " + (e.note or "none kept"),
        e.error or f"the note-taker read {e.prompt_tokens} tokens and wrote {e.completion_tokens}",
    ),
    SkillCatalogPinned: _catalog,
    McpToolsPinned: _mcp_pinned,
    SkillActivated: lambda e: (
        "skill", f"skill {e.name} activated by the {e.by} (sha256 {e.content_hash[:12]})", None
    ),
    SkillActivationFailed: lambda e: ("refusal", f"skill {e.name} could not be activated", e.error),
    ApprovalRequested: lambda e: (
        "approval", f"approval {e.approval_id} requested for {e.tool} ({e.call_id})", e.reason or None
    ),
    ApprovalGranted: lambda e: ("approval", f"approval {e.approval_id} granted by {e.by}", None),
    ApprovalDenied: lambda e: ("approval", f"approval {e.approval_id} denied by {e.by}", e.reason or None),
    AnswerGiven: lambda e: (
        "outcome", "answer" + (f" (sources: {', '.join(e.sources)})" if e.sources else ""), e.answer
    ),
    TaskEscalated: lambda e: ("outcome", "escalated", e.reason),
    JobStarted: lambda e: ("job", f"job {e.job_id} started ({e.call_id})", e.command),
    JobFinished: lambda e: (
        "job", f"job {e.job_id} finished, exit code {'unknown' if e.exit_code is None else e.exit_code}",
        e.summary or None,
    ),
    ArtifactRead: lambda e: ("artifact", f"read {e.path} ({e.size} bytes, sha256 {e.sha256[:12]})", None),
    ArtifactWritten: lambda e: ("artifact", f"wrote {e.path} ({e.size} bytes, sha256 {e.sha256[:12]})", None),
    ArtifactDeleted: lambda e: ("artifact", f"deleted {e.path}", None),
    FileChanged: lambda e: ("artifact", _change_line(e), None),
    RestoreStarted: lambda e: (
        "artifact", f"{e.kind} of {len(e.files)} file{'' if len(e.files) == 1 else 's'} started by {e.by}", None
    ),
    FileRestored: lambda e: (
        "artifact", f"{'deleted' if e.to_sha256 is None else 'put back'} {e.path} ({e.kind})", None
    ),
    RestoreFinished: lambda e: (
        "artifact", "restore finished" + (f"; left as found: {', '.join(e.skipped)}" if e.skipped else ""), None
    ),
    TestsRan: lambda e: ("artifact", f"tests {e.status}: {e.command}", e.summary or None),
}


def _change_line(e: FileChanged) -> str:
    if e.before_sha256 is None:
        return f"created {e.path} ({e.after_size} bytes) in {e.call_id}"
    if e.after_sha256 is None:
        return f"deleted {e.path} ({e.before_size} bytes) in {e.call_id}"
    return f"changed {e.path} ({e.before_size} -> {e.after_size} bytes) in {e.call_id}"

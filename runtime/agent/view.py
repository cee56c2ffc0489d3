"""The task as a decision sees it: one fold of its events, kept up to date as the decision appends.

Everything a decision asks of the log (the history to show, the task's own fields, its skills, the
calls it made, the call that waits on a person, the call a crash left without a result) is folded
here once, event by event, instead of each question scanning the stream again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from runtime.agent import proposal
from runtime.agent.context import Transcript
from runtime.mcp import FACT_MCP_PINNED
from runtime.skills.tools import FACT_ACTIVE_SKILLS
from runtime.tools import FACT_ARTIFACT_REFS
from store.events import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    FileChanged,
    McpToolsPinned,
    ModelCalled,
    ProposalRejected,
    Recorded,
    SkillActivated,
    SkillCatalogPinned,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
    WorkspaceSurveyed,
)
from store.state import TaskSummary, evolve, is_task_event

Decision = ApprovalGranted | ApprovalDenied


@dataclass(frozen=True)
class AwaitingApproval:
    """A tool call proposed and held for its first approval, not started: the person's decision, if any."""

    proposed: ToolCallProposed
    request: ApprovalRequested
    decision: Decision | None


@dataclass(frozen=True)
class Unfinished:
    """A tool call that started and has no result: agentd stopped while it ran.

    `rerun` is the approval asked for since to run it again, and `decision` the answer to that.
    """

    proposed: ToolCallProposed
    started: ToolCallStarted
    rerun: ApprovalRequested | None
    decision: Decision | None


@dataclass
class Calls:
    """A task's tool calls as its events tell them: proposals, the first approval asked for each, the
    answers, the last start and the results. The loop and the job runner both ask it which calls are open."""

    proposed: dict[str, ToolCallProposed] = field(default_factory=dict)
    requests: dict[str, ApprovalRequested] = field(default_factory=dict)
    decisions: dict[str, Decision] = field(default_factory=dict)
    # call id -> (its last ToolCallStarted, that event's position in the stream)
    started: dict[str, tuple[ToolCallStarted, int]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    # The arguments of every call that has a result: a call made before is refused if proposed again.
    done: dict[str, str] = field(default_factory=dict)
    # The tools that have a result, ok or not, at least once.
    ran: set[str] = field(default_factory=set)
    # The calls whose result was not ok: refused, denied, failed, timed out.
    blocked: set[str] = field(default_factory=set)
    # Approval ids of requests to run a call whose changes cannot be recorded -> the call's id.
    unrecorded: dict[str, str] = field(default_factory=dict)
    # The calls with a change recorded since their last start (a crash's changes are recorded once).
    changed: set[str] = field(default_factory=set)

    def apply(self, e: object, position: int) -> None:
        if isinstance(e, ToolCallProposed):
            self.proposed[e.call_id] = e
        elif isinstance(e, ApprovalRequested):
            self.requests.setdefault(e.call_id, e)
            if e.unrecorded:
                self.unrecorded[e.approval_id] = e.call_id
        elif isinstance(e, (ApprovalGranted, ApprovalDenied)):
            self.decisions.setdefault(e.approval_id, e)
        elif isinstance(e, ToolCallStarted):
            self.started[e.call_id] = (e, position)
            self.changed.discard(e.call_id)
        elif isinstance(e, FileChanged):
            self.changed.add(e.call_id)
        elif isinstance(e, ToolCallExecuted):
            self.finished.add(e.call_id)
            call = self.proposed.get(e.call_id)
            if call is not None:
                self.done[proposal.call_key(call.tool, call.arguments)] = e.call_id
            self.ran.add(e.tool)
            if e.status != "ok":
                self.blocked.add(e.call_id)

    def unrecorded_accepted(self, call_id: str) -> bool:
        """Whether a person granted running the call although its changes could not be recorded."""
        return any(
            call == call_id and isinstance(self.decisions.get(approval_id), ApprovalGranted)
            for approval_id, call in self.unrecorded.items()
        )

    def open(self) -> dict[str, str]:
        """Calls that started and have no result yet: call id -> tool."""
        return {call_id: e.tool for call_id, (e, _) in self.started.items() if call_id not in self.finished}


@dataclass
class TaskView:
    records: list[Recorded] = field(default_factory=list)
    transcript: Transcript = field(default_factory=Transcript)
    summary: TaskSummary | None = None
    pinned: SkillCatalogPinned | None = None
    mcp_pinned: McpToolsPinned | None = None
    active: dict[str, SkillActivated] = field(default_factory=dict)
    surveyed: bool = False
    artifact_refs: list[str] = field(default_factory=list)
    calls: Calls = field(default_factory=Calls)
    last_output: str | None = None
    # Every refusal's reason in the task: agentd's words, which an answer may not hand back.
    rejections: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, records: Iterable[Recorded]) -> TaskView:
        view = cls()
        view.extend(records)
        return view

    def extend(self, records: Iterable[Recorded]) -> None:
        for rec in records:
            self.apply(rec)

    def apply(self, rec: Recorded) -> None:
        self.records.append(rec)
        self.transcript.apply(rec)
        if is_task_event(rec):
            self.summary = evolve(self.summary, rec)
        e = rec.event
        ref = getattr(e, "artifact_ref", None) or getattr(e, "output_ref", None)
        if ref:
            self.artifact_refs.append(ref)
        self.calls.apply(e, len(self.records) - 1)
        if isinstance(e, ModelCalled):
            self.last_output = e.output
        elif isinstance(e, ProposalRejected):
            self.rejections.append(e.error)
        elif isinstance(e, SkillActivated):
            self.active[e.name] = e
        elif isinstance(e, SkillCatalogPinned) and self.pinned is None:
            self.pinned = e
        elif isinstance(e, WorkspaceSurveyed):
            self.surveyed = True
        elif isinstance(e, McpToolsPinned) and self.mcp_pinned is None:
            self.mcp_pinned = e

    # -- questions the loop asks -----------------------------------------------------------------

    @property
    def last_rejection(self) -> str:
        return self.rejections[-1] if self.rejections else "refused"

    @property
    def version(self) -> int:
        return self.records[-1].stream_version

    @property
    def submitted(self) -> Recorded:
        first = self.records[0]
        assert isinstance(first.event, TaskSubmitted)
        return first

    @property
    def facts(self) -> dict[str, Any]:
        """Trusted facts tools may check arguments against: the artifacts this task produced, the skills it
        activated, the MCP tools it pinned."""
        facts: dict[str, Any] = {
            FACT_ARTIFACT_REFS: tuple(self.artifact_refs),
            FACT_ACTIVE_SKILLS: {name: e.folder for name, e in self.active.items()},
        }
        if self.mcp_pinned is not None:
            # What each MCP tool was when the task started: a call of one its server changed since is refused.
            facts[FACT_MCP_PINNED] = {t.name: t.sha256 for t in self.mcp_pinned.tools}
        return facts

    @property
    def awaiting_approval(self) -> AwaitingApproval | None:
        """The tool call that waits on its first approval: proposed, not started, no result yet.

        A call that started is past its approval: if it has no result, `unfinished` has it.
        """
        calls = self.calls
        for call_id, request in calls.requests.items():
            if call_id not in calls.started and call_id not in calls.finished:
                return AwaitingApproval(calls.proposed[call_id], request, calls.decisions.get(request.approval_id))
        return None

    @property
    def unfinished(self) -> Unfinished | None:
        calls = self.calls
        for call_id in calls.open():
            if call_id not in calls.proposed:
                continue
            started, i = calls.started[call_id]
            rerun = next((r.event for r in self.records[i + 1:] if isinstance(r.event, ApprovalRequested)), None)
            decision = None if rerun is None else calls.decisions.get(rerun.approval_id)
            return Unfinished(calls.proposed[call_id], started, rerun, decision)
        return None

    def refused_proposal(self) -> dict:
        """The last reply as JSON, to leave a refused action out of the retry (empty if it was not JSON)."""
        if self.last_output is None:
            return {}
        try:
            data = json.loads(self.last_output)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

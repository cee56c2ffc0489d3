"""Re-running a task against its recorded model outputs: how a change to the assembler is checked.

Each recorded model call is rebuilt from the events before it, with today's code, profile, tools and
evidence: the rebuilt manifest is compared block by block with the recorded one, the recorded output
is fed to today's validation instead of calling the model, the verdict is compared with what was
recorded, and for an accepted proposal so is what today's `decide.act` makes of it. Tools are not run
again; their recorded results are part of the history the next step is built from. The first step where
anything differs is reported.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from runtime.agent import (
    choices as choices_,
    compaction,
    decide,
    notes,
    policy as policy_,
    proposal,
    request as request_,
)
from runtime.agent.goal import message_turn
from runtime.agent.host import Runtime, Trusted
from runtime.agent.view import TaskView
from runtime.artifacts import Fetch
from runtime.errors import ContextOverflow
from store.errors import AgentdError
from store.events import (
    CompactionFailed,
    ContextCompacted,
    ContextManifest,
    ContextTrimmed,
    EvidenceRetrieved,
    ModelCalled,
    NoteTaken,
    NotificationsAdmitted,
    ProposalAccepted,
    ProposalRejected,
    Recorded,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallProposed,
)


@dataclass(frozen=True)
class Difference:
    call_index: int
    attempt: int
    what: str

    def __str__(self) -> str:
        return f"step {self.call_index} (try {self.attempt}): {self.what}"


@dataclass(frozen=True)
class RerunReport:
    task_id: str
    calls: int
    difference: Difference | None


def rerun_recorded(rt: Runtime, task_id: str) -> RerunReport:
    records = rt.store.read_stream(task_id)
    if not records or not isinstance(records[0].event, TaskSubmitted):
        raise AgentdError(f"no task {task_id!r}")
    submitted = records[0].event
    profile = rt.profiles.get(submitted.profile)
    if profile is None:
        raise AgentdError(f"task {task_id} uses profile {submitted.profile!r}, which is not loaded")
    trusted = Trusted(task_id, records[0].actor, submitted.tenant, _time_of(records[0]), submitted, profile)
    calls = 0
    for i, rec in enumerate(records):
        if isinstance(rec.event, (ContextCompacted, NoteTaken)):
            check = _check_compaction if isinstance(rec.event, ContextCompacted) else _check_note
            difference = check(rt, records, i)
            if difference is not None:
                return RerunReport(task_id, calls, difference)
        if not isinstance(rec.event, ModelCalled):
            continue
        calls += 1
        difference = _check_call(rt, trusted, records, i)
        if difference is not None:
            return RerunReport(task_id, calls, difference)
    return RerunReport(task_id, calls, None)


@dataclass(frozen=True)
class Reassembled:
    """One recorded request built again under another context policy."""

    call_index: int
    recorded_tokens: int
    tokens: int | None  # None: over the window under that policy
    left_out: int
    left_out_tokens: int
    note: str


def reassemble(rt: Runtime, task_id: str, spec: str) -> list[Reassembled]:
    """Each decision's first request as it would have been under context policy `spec`, built from the
    recorded history (the calls and results stay what they were: only what each request shows changes)."""
    records = rt.store.read_stream(task_id)
    if not records or not isinstance(records[0].event, TaskSubmitted):
        raise AgentdError(f"no task {task_id!r}")
    chosen = str(policy_.parse(spec))
    submitted = records[0].event.model_copy(update={"policy": chosen})
    profile = rt.profiles.get(submitted.profile)
    if profile is None:
        raise AgentdError(f"task {task_id} uses profile {submitted.profile!r}, which is not loaded")
    trusted = Trusted(task_id, records[0].actor, submitted.tenant, _time_of(records[0]), submitted, profile)
    cut = policy_.Cut()
    out = []
    for i, rec in enumerate(records):
        called = rec.event
        if not isinstance(called, ModelCalled) or called.attempt != 1:
            continue
        view = TaskView.of(history_under(records[:i], chosen))
        try:
            request, _, _ = request_.request_for(rt, trusted, view, called.call_index, 1, called.decision,
                                              store_prompt=False, cut=cut)
        except ContextOverflow as e:
            out.append(Reassembled(called.call_index, called.prompt_tokens, None, 0, 0, str(e)))
            continue
        note = ""
        if request.trimmed is not None:
            cut = policy_.Cut(request.trimmed.elided, request.trimmed.dropped)
            note = f"cuts: {cut.elided} results elided, {cut.dropped} steps dropped"
        # What the policy left out: the skill budget and the decision's retrieval leave out the same
        # under every policy.
        retrieved = view.transcript.evidence_left_out.get(called.call_index, ())
        shown = [x for x in request.manifest.left_out if x.kind != "skill" and x not in retrieved]
        out.append(Reassembled(
            called.call_index, called.prompt_tokens, request.manifest.total_tokens, len(shown),
            sum(x.tokens for x in shown), note,
        ))
    return out


def history_under(records: list[Recorded], spec: str) -> list[Recorded]:
    """A task's events as a request under policy `spec` may use them: the recorded cuts belong to the
    recorded policy (this one makes its own), and summaries and notes stay only for a policy that shows
    them, since a re-assembly makes no model call and cannot write new ones."""
    parsed = policy_.parse(spec)
    recorded_only = (ContextTrimmed,
                     *(() if parsed.name == "compact" else (ContextCompacted,)),
                     *(() if parsed.notes else (NoteTaken,)))
    return [r for r in records if not isinstance(r.event, recorded_only)]


def _check_call(rt: Runtime, trusted: Trusted, records: list[Recorded], i: int) -> Difference | None:
    called: ModelCalled = records[i].event
    step, attempt = called.call_index, called.attempt
    before = _before_step(records, i) if attempt == 1 else records[:i]
    if attempt == 1:
        items, _ = request_.retrieve_evidence(rt, trusted, TaskView.of(before).transcript)
        recorded = _recorded_evidence(records, step)
        if [x.cite for x in items] != [x.cite for x in recorded] or [x.sha256 for x in items] != [
            x.sha256 for x in recorded
        ]:
            return Difference(
                step, attempt,
                f"evidence differs: recorded {[x.cite for x in recorded]}, rebuilt {[x.cite for x in items]}",
            )
    view = TaskView.of(records[:i])
    request, _, choices = request_.request_for(rt, trusted, view, step, attempt, called.decision, store_prompt=False)
    if called.manifest is not None:
        diff = _manifest_difference(called.manifest, request.manifest)
        if diff:
            return Difference(step, attempt, diff)
    view.apply(records[i])
    verdict, action = _verdict(
        called.output, choices, view,
        choices_.limit_reached(called.completion_tokens, trusted.profile.max_output_tokens), rt.artifacts.find,
    )
    recorded = _recorded_verdict(records, i)
    if verdict != recorded:
        return Difference(step, attempt, f"outcome differs: recorded {recorded}, rebuilt {verdict}")
    if action is not None:
        return _consequence_difference(rt, trusted, view, records, i, action)
    return None


def _check_compaction(rt: Runtime, records: list[Recorded], i: int) -> Difference | None:
    """A recorded compaction against today's code: the same steps replaced, the same summarizer prompt,
    and the recorded reply read into the same sections."""
    e: ContextCompacted = records[i].event
    t = TaskView.of(records[:i]).transcript
    plan = compaction.plan(t.entries, t.seqs, t.compacted, through=e.through_call)
    if plan is None or (plan.through_call, plan.first_seq, plan.last_seq) != (e.through_call, e.first_seq, e.last_seq):
        rebuilt = "none" if plan is None else f"through {plan.through_call} ({plan.first_seq}-{plan.last_seq})"
        return Difference(e.call_index, 1, f"compaction differs: recorded through {e.through_call} "
                                           f"({e.first_seq}-{e.last_seq}), rebuilt {rebuilt}")
    prompt = rt.model.render(compaction.messages(plan, t.request, t.summary, e.retried_for))
    if hashlib.sha256(prompt.encode()).hexdigest() != e.prompt_sha256:
        return Difference(e.call_index, e.attempts, "the summarizer's prompt differs from the recorded one")
    try:
        sections = compaction.parse(e.output)
    except proposal.Rejected as err:
        return Difference(e.call_index, e.attempts, f"the recorded summary is refused today: {err}")
    if sections != e.sections:
        return Difference(e.call_index, e.attempts, "the recorded summary reads into other sections today")
    return None


def _check_note(rt: Runtime, records: list[Recorded], i: int) -> Difference | None:
    """A recorded note against today's code: the same message, the same note-taker prompt, and the
    recorded reply read into the same note (or the same failure)."""
    e: NoteTaken = records[i].event
    t = TaskView.of(records[:i]).transcript
    message = next((m for m in t.messages if m[0] == message_turn(e.message)), None)
    if message is None or message[1] != e.message_seq:
        return Difference(e.call_index, 1, f"note differs: recorded for {e.message} (event {e.message_seq}), "
                                           "which the rebuilt history does not hold there")
    prompt = rt.model.render(notes.messages(message[2], message[0]))
    if hashlib.sha256(prompt.encode()).hexdigest() != e.prompt_sha256:
        return Difference(e.call_index, 1, f"the note-taker's prompt for {e.message} differs from the recorded one")
    if e.output:  # without one the call failed, and there is no reply to read again
        try:
            read = (notes.parse(e.output), "")
        except proposal.Rejected as err:
            read = ("", str(err))
        if read != (e.note, e.error):
            return Difference(e.call_index, 1, f"the recorded note for {e.message} reads differently today: {read}")
    return None


def _before_step(records: list[Recorded], i: int) -> list[Recorded]:
    """The events before the step began: its evidence is retrieved again to compare, and evidence,
    notifications and a cut of the history recorded for it are not yet history."""
    step = records[i].event.call_index
    j = i
    while j > 0 and isinstance(records[j - 1].event, _BEFORE_CALL) and (
        records[j - 1].event.call_index == step
    ):
        j -= 1
    return records[:j]


# What a step records before its first model call, in the step it is for.
_BEFORE_CALL = (EvidenceRetrieved, NotificationsAdmitted, NoteTaken, ContextTrimmed, ContextCompacted, CompactionFailed)


def _recorded_evidence(records: list[Recorded], step: int):
    return [item for r in records if isinstance(r.event, EvidenceRetrieved) and r.event.call_index == step
            for item in r.event.items]


def _manifest_difference(recorded: ContextManifest, rebuilt: ContextManifest) -> str | None:
    # Manifests of different lengths are told apart after the blocks they share.
    for a, b in zip(recorded.items, rebuilt.items, strict=False):
        if (a.block, a.sha256) != (b.block, b.sha256):
            return f"the manifest differs at block {a.block!r} (rebuilt: {b.block!r})"
    if len(recorded.items) != len(rebuilt.items):
        return f"the manifest has {len(rebuilt.items)} blocks rebuilt, {len(recorded.items)} recorded"
    if recorded.prompt_ref != rebuilt.prompt_ref:
        return "the prompt text differs although every block matches (layout or chat template changed)"
    return None


def _verdict(
    output: str, choices: choices_.Choices, view: TaskView, cut_at: int | None, fetch: Fetch
) -> tuple[str, proposal.Action | None]:
    try:
        action = choices_.judge(output, choices, view, cut_at, fetch)
    except proposal.Rejected as e:
        return f"rejected: {e}", None
    return f"accepted: {action.model_dump_json()}", action


def _consequence_difference(
    rt: Runtime, trusted: Trusted, view: TaskView, records: list[Recorded], i: int, action: proposal.Action
) -> Difference | None:
    """What today's `decide.act` makes of the accepted proposal, against the events recorded after it.

    Compared by kind and, for a tool call, by the call itself: approval ids and expiry times are
    drawn when the decision is taken, so they differ by nature.
    """
    step, attempt = records[i].event.call_index, records[i].event.attempt
    j = next((k for k in range(i + 1, len(records)) if isinstance(records[k].event, ProposalAccepted)), None)
    if j is None:
        return None
    contract = rt.tools.get(action.tool).contract if isinstance(action, proposal.CallTool) else None
    policy = decide.Policy(trusted.now, rt.approval_ttl, trusted.profile.version, lambda: "ap-rerun")
    decision = decide.act(view, step, action, contract, policy)
    rebuilt = [_shape(e) for e in decision.events]
    recorded = [_shape(r.event) for r in records[j + 1:j + 1 + len(rebuilt)]]
    if rebuilt != recorded:
        return Difference(step, attempt, f"the decision differs: recorded {recorded}, rebuilt {rebuilt}")
    return None


def _shape(e) -> str:
    if isinstance(e, ToolCallProposed):
        return f"ToolCallProposed({e.tool} {e.arguments})"
    if isinstance(e, TaskPhaseChanged):
        return f"TaskPhaseChanged({e.phase.value})"
    return type(e).__name__


def _recorded_verdict(records: list[Recorded], i: int) -> str:
    for rec in records[i + 1:]:
        e = rec.event
        if isinstance(e, ProposalRejected):
            return f"rejected: {e.error}"
        if isinstance(e, ProposalAccepted):
            return f"accepted: {proposal.from_dict(e.action).model_dump_json()}"
        if isinstance(e, ModelCalled):
            break
    return "no verdict recorded"


def _time_of(rec: Recorded) -> datetime:
    return datetime.fromisoformat(rec.recorded_at.replace("Z", "+00:00"))

"""The agent loop: a task runs as a sequence of decisions, each assembled, proposed, checked, recorded.

One decision, in the order of seed 000's assembly cycle, each step a function below:
  1. trusted request context   (`_trusted`: actor, tenant, time, task state, from the store)
  2. the kind of decision      (`_decision_kind`)
  3. retrieval within scope    (`_retrieve`: authorization is a filter before ranking)
  4. ranking and packing       (inside `knowledge.retrieve`, within the evidence budget)
  5. assembly with trust       (`context.assemble`: prefix + transcript + this turn, fenced data)
  6. a constrained proposal    (`model.acomplete` with the proposal's JSON schema)
  7. validation and execution  (`judge`; then `decide.act` says what the action comes to, and the
                               loop appends its events and performs its one side effect)
  8. recording                 (every step above is an event, appended with the expected version)
Each decision folds the task's events once into a `TaskView` and extends it with its own appends.
Everything the loop needs to continue is in the log, so a task resumes after a stop or a crash by
reading its events (`decide.settle`); nothing lives only in memory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Mapping, Protocol, Sequence

import anyio

from notifications import queue
from runtime import content, logs
from runtime.agent import (
    claims,
    compaction,
    context,
    decide,
    goal,
    knowledge,
    notes,
    policy as policy_,
    progress as progress_,
    proposal,
    relevance,
    removal,
    rules,
)
from runtime.agent.blocks import Block
from runtime.agent.decide import arguments_hash  # noqa: F401  the page checks approvals with it
from runtime.agent.profiles import Profile, catalog_block, catalog_counter, output_contract, prefix_blocks
from runtime.agent.progress import Progress
from runtime.agent.view import TaskView
from runtime.artifacts import ArtifactStore, ref_for
from runtime.errors import ContextOverflow, InferenceError
from runtime.inference.model import Model
from runtime.skills import activation
from runtime.tools import (
    ToolContext,
    ToolContract,
    ToolOutcome,
    ToolRefused,
    ToolRegistry,
    edits,
    execute,
    preview,
    recording,
    snapshot,
)
from runtime.tools.finder import best_lines
from runtime.tools.schema import inline_schema
from runtime.tools.workspace import survey
from store import EventStore
from store.errors import AgentdError, ConcurrencyConflict
from store.events import (
    AnswerGiven,
    ApprovalRequested,
    CompactionFailed,
    ContentMatched,
    ContextCompacted,
    ContextTrimmed,
    EvidenceItem,
    EvidenceRetrieved,
    FileChanged,
    LeftOut,
    MatchedLine,
    ModelCalled,
    NoteTaken,
    NotificationsAdmitted,
    ProposalAccepted,
    ProposalRejected,
    Recorded,
    SkillActivated,
    TaskEscalated,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
    WorkspaceSurveyed,
)

log = logs.get_logger("agentd.agent")

EVIDENCE_BUDGET = 1200
EVIDENCE_PER_DECISION = 3
# A section must earn its tokens: with a query of a goal and a tool result, one shared word (a plan's
# name, "account") scores a tenth or so, which used to let unrelated documents into the window.
EVIDENCE_MIN_UTILITY = 0.2
# And it must be close to the best match: measured on the default model, shown the expired-key and
# rate-limit sections beside the revoked-key one, it explained a revoked key as an expired plan or a 429.
EVIDENCE_MIN_SHARE = 0.5
# The repeat penalty of a retry after a runaway reply (llama.cpp's, over the last 64 tokens).
RUNAWAY_PENALTY = 1.3
APPROVAL_TTL = timedelta(hours=24)
MAX_CONFLICTS = 3


class JobHost(Protocol):
    """What runs the background jobs a task starts (the harness's JobRunner): the loop only carries it
    for the process that owns it, which recovers jobs a crash left and closes it at the end."""

    def recover(self) -> list[str]: ...

    def close(self) -> None: ...


@dataclass
class Runtime:
    """What running a task needs; one per process."""

    store: EventStore
    model: Model
    tools: ToolRegistry
    profiles: dict[str, Profile]
    artifacts: ArtifactStore
    protected: tuple[Path, ...] = ()
    jobs: JobHost | None = None  # runs what start_job starts, when this process offers it
    skill_roots: tuple[Path, ...] = ()
    skills_budget_tokens: int = 1024
    approval_ttl: timedelta = APPROVAL_TTL
    progress: progress_.Reporter = progress_.ignore  # what a running decision is doing, for people to watch
    # How much of a workspace is recorded before a call that may change it; more waits for a person.
    record_limit: snapshot.Limit = snapshot.Limit()
    _sections: dict[Path, list[knowledge.Section]] = field(default_factory=dict)
    # The last whole-workspace snapshot per workspace: the next one reads only the files that changed.
    _snapshots: dict[Path, snapshot.Snapshot] = field(default_factory=dict)

    def last_snapshot(self, ctx: ToolContext) -> snapshot.Snapshot | None:
        return self._snapshots.get(ctx.workspace)

    def remember(self, ctx: ToolContext, taken: snapshot.Snapshot) -> None:
        if taken.paths is None:
            self._snapshots[ctx.workspace] = taken

    def sections(self, profile: Profile) -> list[knowledge.Section]:
        if profile.knowledge is None:
            return []
        if profile.knowledge not in self._sections:
            self._sections[profile.knowledge] = knowledge.load_folder(profile.knowledge)
        return self._sections[profile.knowledge]


@dataclass(frozen=True)
class Trusted:
    """Step 1: who is asking and about what, read from the store; never from the model."""

    task_id: str
    actor: str
    tenant: str
    now: datetime
    submitted: TaskSubmitted
    profile: Profile


class Stop(Exception):
    """The task cannot take another decision now (finished, or waiting for a person)."""


@dataclass(frozen=True)
class Stopped:
    """Where a runner stopped: the task's phase, and the version of its stream the runner last read.

    A scheduler parks a waiting task at that version, not at one it reads afterwards: a person's
    decision recorded between the two would otherwise count as already seen, and the task would wait
    for ever.
    """

    phase: str
    version: int


async def run_task(rt: Runtime, task_id: str, *, max_decisions: int | None = None) -> str:
    """Take decisions until the task finishes or waits for a person; return its phase then."""
    return (await run_until_stopped(rt, task_id, max_decisions=max_decisions)).phase


async def run_until_stopped(rt: Runtime, task_id: str, *, max_decisions: int | None = None) -> Stopped:
    """`run_task`, also saying which version of the task's stream the runner stopped at."""
    runner = _Runner(rt, task_id)
    taken = conflicts = 0
    while max_decisions is None or taken < max_decisions:
        try:
            await runner.step()
        except Stop:
            break
        except ConcurrencyConflict:
            # Someone else recorded something for the task meanwhile (a cancel, a decision): the next
            # step reads the log again and goes on from what is there now.
            conflicts += 1
            if conflicts > MAX_CONFLICTS:
                raise
            continue
        taken += 1
    return Stopped(runner.phase(), runner.view.version if runner.records else 0)


class _Runner:
    def __init__(self, rt: Runtime, task_id: str) -> None:
        self.rt = rt
        self.task_id = task_id
        self.view = TaskView()

    # -- the log ---------------------------------------------------------------------------------

    def _load(self) -> None:
        """One fold of the task's stream per decision; the decision's own appends extend it."""
        self.view = TaskView.of(self.rt.store.read_stream(self.task_id))
        if not self.view.records:
            raise AgentdError(f"no task {self.task_id!r}")

    @property
    def records(self) -> list[Recorded]:
        return self.view.records

    async def _append(self, *events) -> list[Recorded]:
        """Append with the version we last saw: if anyone else moved the task, this fails, not them."""
        recorded = await self.rt.store.append_async(
            self.task_id, list(events), expected_version=self.view.version, actor="agentd"
        )
        self.view.extend(recorded)
        return recorded

    def phase(self) -> str:
        return self.view.summary.phase if self.view.summary else "unknown"

    # -- one decision ----------------------------------------------------------------------------

    async def step(self) -> None:
        self._deciding: int | None = None
        try:
            await self._step()
        finally:
            if self._deciding is not None:
                self._report(self._deciding, "decided", detail=decided_line(self.records, self._deciding))

    def _report(self, step: int, stage: progress_.Stage, done: int = 0, total: int = 0, detail: str = "") -> None:
        try:
            self.rt.progress(Progress(self.task_id, step, stage, done, total, detail))
        except Exception:  # noqa: BLE001  a display that fails must not fail the task
            log.exception("progress reporter failed", task_id=self.task_id)

    async def _step(self) -> None:
        self._load()
        view = self.view
        assert view.summary is not None
        phase = TaskPhase(view.summary.phase)
        if phase.finished:
            raise Stop
        trusted = self._trusted()
        await self._recover_changes(trusted)
        settled = decide.settle(view, self._policy(trusted))
        if settled is not None:
            await self._carry_out(trusted, settled)
            return
        if phase in (TaskPhase.AWAITING_APPROVAL, TaskPhase.WAITING_FOR_USER):
            raise Stop
        if phase is TaskPhase.SUBMITTED:
            await self._append(TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="started"))
        summary = view.summary
        if view.transcript.turn_calls >= summary.max_steps:
            await self._fail(f"step cap reached: {summary.max_steps} model calls")
            raise Stop
        if summary.tokens_used >= summary.max_tokens:
            await self._fail(f"token cap reached: {summary.tokens_used} of {summary.max_tokens} tokens")
            raise Stop

        call_index = view.transcript.calls + 1
        self._deciding = call_index
        self._report(call_index, "deciding")
        if call_index == 1:
            await self._pin_skills(trusted)
            await self._survey_workspace(trusted)
        kind = _decision_kind(summary, call_index - view.transcript.turn_start)
        await self._retrieve(trusted, call_index)
        await self._admit_notifications(call_index)
        await self._take_notes(trusted, call_index)
        await self._compact(trusted, call_index, kind)
        try:
            action = await self._propose(trusted, call_index, kind)
        except ContextOverflow as e:
            await self._fail(str(e))
            raise Stop from None
        if action is None:
            raise Stop
        contract = self.rt.tools.get(action.tool).contract if isinstance(action, proposal.CallTool) else None
        unrecorded = confirm = None
        if contract is not None and isinstance(action, proposal.CallTool):
            unrecorded = await self._unrecordable(trusted, contract, action.arguments)
            if trusted.submitted.confirm_changes or trusted.profile.confirm_changes:
                confirm = await self._confirmation(trusted, action)
        await self._carry_out(
            trusted, decide.act(view, call_index, action, contract, self._policy(trusted), unrecorded, confirm)
        )

    def _trusted(self) -> Trusted:
        first = self.view.submitted
        submitted = first.event
        profile = self.rt.profiles.get(submitted.profile)
        if profile is None:
            raise AgentdError(f"task {self.task_id} uses profile {submitted.profile!r}, which is not loaded")
        return Trusted(self.task_id, first.actor, submitted.tenant, datetime.now(UTC), submitted, profile)

    def _policy(self, trusted: Trusted) -> decide.Policy:
        return decide.Policy(
            # The clock as the decision is judged, not as it began: an approval it requests expires a
            # TTL after the request, however long the model call before it took.
            now=datetime.now(UTC),
            approval_ttl=self.rt.approval_ttl,
            policy_version=trusted.profile.version,
            new_approval_id=lambda: f"ap-{secrets.token_hex(4)}",
        )

    async def _carry_out(self, trusted: Trusted, decision: decide.Decision) -> None:
        """The I/O of a decision: its events, then its one side effect."""
        if decision.events:
            await self._append(*decision.events)
        for e in decision.events:
            if isinstance(e, ApprovalRequested) and decision.waits:
                log.info("approval requested", task_id=self.task_id, approval_id=e.approval_id, tool=e.tool)
        effect = decision.effect
        if isinstance(effect, decide.RunTool):
            await self._execute(trusted, effect.proposed, approved=effect.approved)
        elif isinstance(effect, decide.TakeInSkill):
            pinned = self.view.pinned
            assert pinned is not None, "judge accepts only skills of the task's catalog"
            await self._append(
                await anyio.to_thread.run_sync(activation.activate, pinned, effect.name, effect.call_index)
            )
        if decision.waits:
            raise Stop

    async def _pin_skills(self, trusted: Trusted) -> None:
        """Before the first request: fix the task's skill catalog, and take in a skill the goal names
        with `/name`. Both are in the log, so a restart or a replay finds them there instead."""
        pinned = self.view.pinned
        if pinned is None and self.rt.skill_roots:
            pinned = await anyio.to_thread.run_sync(
                activation.pin, self.rt.skill_roots, self.rt.skills_budget_tokens, catalog_counter(self.rt.model.count)
            )
            await self._append(pinned)
        name = activation.user_request(trusted.submitted.goal, pinned)
        if name is not None and name not in self.view.active:
            await self._append(await anyio.to_thread.run_sync(activation.activate, pinned, name, 0, "user"))

    async def _survey_workspace(self, trusted: Trusted) -> None:
        """Before the first request of a task with the file tools: the workspace's layout, recorded, so
        the model starts from the paths that exist (a small model otherwise guesses "README" or
        "/config/database" and loops on the errors) and a replay shows the listing it saw."""
        if self.view.surveyed:
            return
        if not {"list_files", "read_file"} & set(offered_tools(self.rt, trusted)):
            return
        ctx = self._tool_context(trusted)
        entries, complete = await anyio.to_thread.run_sync(survey, ctx)
        surveyed = WorkspaceSurveyed(entries=tuple(entries), complete=complete)
        matched = await anyio.to_thread.run_sync(match_content, ctx, goal.own_words(trusted.submitted.goal), entries)
        await self._append(surveyed, *([matched] if matched else []))

    def _tool_context(self, trusted: Trusted) -> ToolContext:
        return ToolContext(
            task_id=self.task_id,
            tenant=trusted.tenant,
            actor=trusted.actor,
            workspace=Path(trusted.submitted.workspace),
            artifacts=self.rt.artifacts,
            facts=self.view.facts,
            protected=self.rt.protected,
        )

    async def _retrieve(self, trusted: Trusted, call_index: int) -> None:
        """Steps 3 and 4, recorded with the evidence's text so the task's later requests repeat it."""
        items, left_out = retrieve_evidence(self.rt, trusted, self.view.transcript)
        if items:
            await self._append(EvidenceRetrieved(call_index=call_index, items=items, left_out=left_out))

    async def _admit_notifications(self, call_index: int) -> None:
        """Drain the queue into this request's tail. Recorded before the call: after a crash the step
        is taken again and shows them from the log; the store refuses to admit them a second time."""
        with self.rt.store.reading() as conn:
            waiting = queue.pending(conn, self.task_id)
        if waiting:
            await self._append(NotificationsAdmitted(call_index=call_index, items=queue.drain(waiting)))

    async def _propose(self, trusted: Trusted, call_index: int, kind: str) -> proposal.Action | None:
        """Steps 5 to 7 for one decision. A refused proposal is explained and retried with a narrower
        choice (the refused tool or skill not offered again, then only answering or escalating), so a
        refusal steers the model instead of ending the task."""
        penalty = 1.0
        for attempt in range(1, context.LAST_ATTEMPT + 1):
            try:
                request, schema, choices = request_for(
                    self.rt, trusted, self.view, call_index, attempt, kind, store_prompt=True
                )
            except InferenceError as e:  # the chat template refused the messages
                await self._fail(f"the request for step {call_index} could not be built: {e}")
                return None
            if request.trimmed is not None:
                # Before the call, like evidence and notifications: a re-run finds the cut in the log.
                await self._append(request.trimmed)
                log.info("history cut", task_id=self.task_id, call_index=call_index, elided=request.trimmed.elided,
                         dropped=request.trimmed.dropped, tokens_before=request.trimmed.tokens_before)
            try:
                completion = await self.rt.model.acomplete(
                    request.prompt,
                    schema=schema,
                    max_tokens=trusted.profile.max_output_tokens,
                    session=self.task_id,
                    progress=lambda stage, done, total: self._report(call_index, stage, done, total),
                    repeat_penalty=penalty,
                )
            except InferenceError as e:
                await self._fail(f"the model failed: {e}")
                return None
            broken = context.prefix_break(self.view.transcript.last_manifest, request.manifest)
            if broken is not None:
                log.warning("prefix break", task_id=self.task_id, call_index=call_index, at=broken)
            s = completion.stats
            await self._append(
                ModelCalled(
                    call_index=call_index,
                    attempt=attempt,
                    model=self.rt.model.name,
                    decision=kind,
                    manifest=request.manifest,
                    prompt_tokens=s.prompt_tokens,
                    completion_tokens=s.completion_tokens,
                    cached_tokens=s.cached_tokens,
                    evaluated_tokens=s.evaluated_tokens,
                    ttft_s=s.ttft_s,
                    generation_s=s.generation_s,
                    output=completion.text,
                    prefix_break=broken,
                    repeat_penalty=penalty,
                )
            )
            cut = limit_reached(s.completion_tokens, trusted.profile.max_output_tokens)
            try:
                action = judge(completion.text, choices, self.view, cut)
            except proposal.Rejected as e:
                await self._append(ProposalRejected(call_index=call_index, attempt=attempt, error=str(e)))
                if isinstance(e, proposal.Unbacked):
                    await self._fail(str(e))
                    return None
                # Told its reply was too long, the default model wrote the same runaway (a tab 300 times,
                # a CSV's rows past its end) again: greedy decoding repeats itself unless made not to.
                penalty = RUNAWAY_PENALTY if cut is not None else penalty
                continue
            await self._append(ProposalAccepted(call_index=call_index, action=action.model_dump(mode="json")))
            return action
        await self._fail(
            f"the model's proposal was refused {context.LAST_ATTEMPT} times at step {call_index}, the last time "
            f"with only an answer or an escalation to choose: {self.view.last_rejection}"
        )
        return None

    async def _compact(self, trusted: Trusted, call_index: int, kind: str) -> None:
        """Under `compact`, before a request that would fill TRIGGER of the budget: the older steps
        summarized by a model call of their own, recorded as ContextCompacted, or as CompactionFailed
        after one retry (the request is then cut as `auto` cuts, never silently truncated)."""
        if policy_.parse(trusted.submitted.policy).name != "compact":
            return
        view, t = self.view, self.view.transcript
        if t.compaction_failed_at is not None and call_index - t.compaction_failed_at < compaction.RETRY_AFTER:
            return
        budget = context.budget_of(self.rt.model.n_ctx, trusted.profile.max_output_tokens)
        before = _tokens(self.rt, trusted, view, call_index, kind, budget)
        if before <= compaction.TRIGGER * budget:
            return
        plan = compaction.plan(t.entries, t.seqs, t.compacted)
        if plan is None:
            return
        error, used = "", (0, 0)
        room = self.rt.model.n_ctx - compaction.MAX_TOKENS - context.PROTOCOL_OVERHEAD
        for attempt in range(1, compaction.ATTEMPTS + 1):
            prompt = self.rt.model.render(compaction.messages(plan, t.request, t.summary, error))
            # The summarizer has the same window: fewer steps at a time when all of them would not fit.
            while plan is not None and self.rt.model.count(prompt) > room:
                plan = compaction.shorter(t.entries, t.seqs, t.compacted, plan)
                if plan is not None:
                    prompt = self.rt.model.render(compaction.messages(plan, t.request, t.summary, error))
            if plan is None:
                error = "not even the oldest step fits the summarizer's window"
                break
            self._report(call_index, "compacting")
            try:
                completion = await self.rt.model.acomplete(
                    prompt, schema=compaction.SCHEMA, max_tokens=compaction.MAX_TOKENS,
                    # Its own session: the task's KV state is kept aside for the request that follows.
                    session=f"{self.task_id}/compaction",
                )
            except (InferenceError, ContextOverflow) as e:
                error = f"the model failed: {e}"
                break
            s = completion.stats
            used = (used[0] + s.prompt_tokens, used[1] + s.completion_tokens)
            try:
                sections = compaction.parse(completion.text)
            except proposal.Rejected as e:
                error = str(e)
                continue
            event = ContextCompacted(
                call_index=call_index, through_call=plan.through_call, first_seq=plan.first_seq,
                last_seq=plan.last_seq, sections=sections, summary_sha256=compaction.sha256(sections),
                tokens_before=before, tokens_after=0, budget=budget, model=self.rt.model.name,
                prompt_ref=self.rt.artifacts.put(prompt.encode()),
                prompt_sha256=hashlib.sha256(prompt.encode()).hexdigest(),
                prompt_tokens=used[0], completion_tokens=used[1], attempts=attempt, retried_for=error,
                output=completion.text,
            )
            last = view.records[-1]
            provisional = last._replace(seq=last.seq + 1, stream_version=last.stream_version + 1, event=event)
            after = _tokens(self.rt, trusted, TaskView.of([*view.records, provisional]), call_index, kind, budget)
            await self._append(event.model_copy(update={"tokens_after": after}))
            log.info("history compacted", task_id=self.task_id, call_index=call_index, through=plan.through_call,
                     tokens_before=before, tokens_after=after)
            return
        log.warning("compaction failed", task_id=self.task_id, call_index=call_index, error=error)
        await self._append(CompactionFailed(
            call_index=call_index, error=error, prompt_tokens=used[0], completion_tokens=used[1]
        ))

    async def _take_notes(self, trusted: Trusted, call_index: int) -> None:
        """With `notes`, each user message not yet read by the note-taker: one short call of its own,
        recorded as NoteTaken (a note or none). A call that fails records why and keeps no note: the
        message itself stays in the history, so nothing of the user's is lost with it."""
        if not policy_.parse(trusted.submitted.policy).notes:
            return
        t = self.view.transcript
        for turn, seq, blocks in t.messages:
            if turn in t.noted:
                continue
            prompt = self.rt.model.render(notes.messages(blocks, turn))
            self._report(call_index, "noting", turn)
            note, error, output, used = "", "", "", (0, 0)
            try:
                completion = await self.rt.model.acomplete(
                    prompt, schema=notes.SCHEMA, max_tokens=notes.MAX_TOKENS, session=f"{self.task_id}/notes",
                )
                output, s = completion.text, completion.stats
                used = (s.prompt_tokens, s.completion_tokens)
                note = notes.parse(output)
            except (InferenceError, ContextOverflow) as e:
                error = f"the model failed: {e}"
            except proposal.Rejected as e:
                error = str(e)
            if error:
                log.warning("note not taken", task_id=self.task_id, turn=turn, error=error)
            await self._append(NoteTaken(
                call_index=call_index, message=goal.message_label(turn), message_seq=seq, note=note,
                model=self.rt.model.name, prompt_ref=self.rt.artifacts.put(prompt.encode()),
                prompt_sha256=hashlib.sha256(prompt.encode()).hexdigest(), prompt_tokens=used[0],
                completion_tokens=used[1], output=output, error=error,
            ))

    # -- the one side effect of a decision: running a tool ---------------------------------------

    async def _execute(self, trusted: Trusted, proposed: ToolCallProposed, *, approved: bool) -> None:
        tool = self.rt.tools.get(proposed.tool)
        ctx = self._tool_context(trusted)
        stale = await self._changed_since_confirmed(ctx, proposed.call_id) if approved else None
        if stale is not None:
            refusal = ToolOutcome.refusal(proposed.tool, ToolRefused(
                "changed_since_confirmed", f"{stale} changed after the change to it was confirmed; nothing was done"
            ))
            await self._append(refusal.executed(proposed.call_id))
            return
        paths = recording.scope(tool.contract, proposed.arguments)
        before = None
        if paths is not recording.NOTHING:
            try:
                before = await anyio.to_thread.run_sync(
                    lambda: snapshot.take(ctx, paths, previous=self.rt.last_snapshot(ctx), limit=self.rt.record_limit)
                )
            except snapshot.TooLarge as e:
                if not (approved and self.view.calls.unrecorded_accepted(proposed.call_id)):
                    refusal = ToolOutcome.refusal(proposed.tool, ToolRefused("workspace_too_large", str(e)))
                    await self._append(refusal.executed(proposed.call_id))
                    return
                log.warning("call runs unrecorded", task_id=self.task_id, call_id=proposed.call_id, reason=str(e))
        # Recorded before the tool runs: after a crash, a start without a result is a known unknown, and
        # the snapshot says what the workspace held before it.
        await self._append(
            ToolCallStarted(
                call_id=proposed.call_id,
                tool=proposed.tool,
                idempotent=tool.contract.idempotent,
                effects=tuple(e.value for e in tool.contract.effects),
                recorded=None if before is None else self.rt.artifacts.put(before.encode()),
            )
        )
        self._report(self._deciding or 0, "running_tool", detail=proposed.tool)
        outcome = await anyio.to_thread.run_sync(lambda: execute(tool, ctx, proposed.arguments, approved=approved))
        changed: list[FileChanged] = []
        if before is not None:
            changed, after, note = await anyio.to_thread.run_sync(
                lambda: recording.compare(ctx, before, proposed.call_id, self.rt.record_limit)
            )
            if after is not None:
                self.rt.remember(ctx, after)
            outcome = recording.shown(outcome, changed, self.rt.artifacts, note)
        await self._append(outcome.executed(proposed.call_id), *outcome.artifact_events, *changed)

    async def _confirmation(self, trusted: Trusted, action: proposal.CallTool) -> decide.Confirm | None:
        """For a task that confirms its changes: the change the call would make, shown before it is made
        (a preview on a copy of its file), or why it cannot be shown; None for a call that changes nothing."""
        tool = self.rt.tools.get(action.tool)
        if tool.contract.may_change is None:
            return None
        ctx = self._tool_context(trusted)
        shown = await anyio.to_thread.run_sync(lambda: preview.preview(tool, ctx, action.arguments))
        if shown is None:
            return decide.Confirm(
                f"{action.tool} may change any file in the workspace: what it changed is shown after it ran, "
                "and can be undone", {},
            )
        return decide.Confirm(shown.diff, {shown.path: shown.sha256}) if shown.changes else None

    async def _changed_since_confirmed(self, ctx: ToolContext, call_id: str) -> str | None:
        """A file a confirmed change is bound to that no longer has the bytes the person was shown."""
        request = self.view.calls.requests.get(call_id)
        if request is None or not request.bound:
            return None
        now = await anyio.to_thread.run_sync(lambda: preview.hashes(ctx, list(request.bound)))
        return next((path for path, digest in request.bound.items() if now.get(path) != digest), None)

    async def _unrecordable(self, trusted: Trusted, contract: ToolContract, arguments: Mapping) -> str | None:
        """Why the files a proposed call may change cannot be recorded before it runs, if they cannot."""
        paths = recording.scope(contract, arguments)
        if paths is recording.NOTHING:
            return None
        ctx = self._tool_context(trusted)
        try:
            await anyio.to_thread.run_sync(lambda: snapshot.check_size(ctx, paths, self.rt.record_limit))
        except snapshot.TooLarge as e:
            return str(e)
        return None

    async def _recover_changes(self, trusted: Trusted) -> None:
        """A call a crash left without a result: what it changed is recorded, once, from the snapshot taken
        before it ran, before anyone decides whether it runs again."""
        found = self.view.unfinished
        if found is None or found.rerun is not None or found.started.recorded is None:
            return
        if found.proposed.call_id in self.view.calls.changed:
            return
        ctx = self._tool_context(trusted)
        before = snapshot.Snapshot.decode(self.rt.artifacts.get(found.started.recorded))
        changed, _, _ = await anyio.to_thread.run_sync(
            lambda: recording.compare(ctx, before, found.proposed.call_id, self.rt.record_limit)
        )
        if changed:
            log.warning("changes of an interrupted call recorded", task_id=self.task_id,
                        call_id=found.proposed.call_id, files=len(changed))
            await self._append(*changed)

    async def _fail(self, reason: str) -> None:
        log.warning("task failed", task_id=self.task_id, reason=reason)
        await self._append(TaskPhaseChanged(phase=TaskPhase.FAILED, reason=reason))


def retrieve_evidence(
    rt: Runtime, trusted: Trusted, transcript: context.Transcript
) -> tuple[tuple[EvidenceItem, ...], tuple[LeftOut, ...]]:
    """Steps 3 and 4: evidence the tenant may see, not yet shown, ranked by utility, packed in budget,
    in the order it is shown: the best match last."""
    sections = rt.sections(trusted.profile)
    if not sections:
        return (), ()
    last_read = transcript.last_read
    observation = transcript.results[last_read.label].observation if last_read else {}
    packed = knowledge.retrieve(
        sections,
        tenant=trusted.tenant,
        query=" ".join([trusted.submitted.goal, *_result_words(observation)]),
        exclude=set(transcript.evidence_ids),
        budget=EVIDENCE_BUDGET,
        limit=EVIDENCE_PER_DECISION,
        count=rt.model.count,
        min_utility=EVIDENCE_MIN_UTILITY,
        min_share=EVIDENCE_MIN_SHARE,
    )
    # Shown best last, next to the decision: measured on the default model with an injected on-call note
    # after the runbook section, it answered right and cited the note.
    items = tuple(
        EvidenceItem(
            cite=c.section.cite,
            source=c.section.doc_id,
            version=c.section.version,
            sha256=hashlib.sha256(c.section.text.encode()).hexdigest(),
            text=c.section.text,
            utility=c.utility,
            tokens=c.tokens,
        )
        for c in reversed(packed.selected)
    )
    left_out = tuple(
        LeftOut(source=c.section.cite, kind="evidence", tokens=c.tokens, reason=reason) for c, reason in packed.left_out
    )
    return items, left_out


_NOT_WORDS = frozenset({"tool", "status", "sha256", "artifact_ref"})
_DATE = re.compile(r"^\d{4}-\d\d-\d\d")


def _result_words(observation: dict) -> list[str]:
    """What a tool result says, for the next retrieval query: its text values, not its field names
    (every result has "status", "tool", ids and dates, which would match any document). Read from the
    recorded observation: the block the model reads is `key: value` lines, field names and all, and as
    a query those names outweighed the one word that mattered (measured: "revoked" among a dozen)."""
    words: list[str] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in _NOT_WORDS:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and not _DATE.match(value):
            words.append(value)

    walk(observation)
    return words


MATCHED_LINES = 5


def match_content(ctx: ToolContext, request: str, entries: Sequence[str]) -> ContentMatched | None:
    """Where a request names none of the workspace's files, the lines that best match its words: a
    small model otherwise picks the file whose name looks likely and answers from it (measured on the
    default model: 0 of 10 "which file says ..." cases of an unseen generated suite). A request that
    writes out a file's name, of the workspace or a new one, says where to look or write, and lines of
    look-alike files would only lead it away."""
    wanted = content.words(request)
    if not wanted or relevance.names_a_file(request, [e for e in entries if not e.endswith("/")]):
        return None
    found, indexed, _ = best_lines(ctx, " ".join(wanted), MATCHED_LINES)
    if not found:
        return None
    lines = tuple(MatchedLine(path=f.path, line=f.line, text=f.text, score=f.score) for f in found)
    return ContentMatched(words=tuple(wanted), matches=lines, files=indexed)


def offered_tools(rt: Runtime, trusted: Trusted, has_skills: bool = False, view: TaskView | None = None) -> list[str]:
    """The profile's tools whose effects the task was allowed; the rest are not even described.

    A task with skills in its catalog is offered the skill tools too, on the same terms: a skill's
    scripts run only for a task allowed external effects. A sub-task is offered only the tools its
    parent gave it. A tool the profile offers on request is described once a message of the user's
    asks for what it does (`view`: the task's messages so far; without it, the goal alone): until
    then its definition would only draw a small model to it, and every other task's request stays as
    it was.
    """
    allowed = set(trusted.submitted.allowed_effects)
    names = [*trusted.profile.tools, *(activation.SKILL_TOOLS if has_skills else ())]
    only = trusted.submitted.tools
    on_request = trusted.profile.on_request
    said = [b[0].text for _, _, b in view.transcript.messages] if view else [
        goal.blocks(trusted.submitted.goal)[0].text
    ]
    return [
        name
        for name in dict.fromkeys(names)
        if name in rt.tools and {e.value for e in rt.tools.get(name).contract.effects} <= allowed
        and (only is None or name in only)
        and (name not in on_request or any(_asked_for(name, on_request[name], goal.own_words(m), view) for m in said))
    ]


def build_request(
    rt: Runtime,
    trusted: Trusted,
    records: Sequence[Recorded],
    call_index: int,
    attempt: int,
    kind: str,
    *,
    store_prompt: bool,
) -> tuple[context.Request, dict, Choices]:
    """`request_for` the task as `records` leave it."""
    return request_for(rt, trusted, TaskView.of(records), call_index, attempt, kind, store_prompt=store_prompt)


def request_for(
    rt: Runtime,
    trusted: Trusted,
    view: TaskView,
    call_index: int,
    attempt: int,
    kind: str,
    *,
    store_prompt: bool,
    cut: policy_.Cut | None = None,
) -> tuple[context.Request, dict, Choices]:
    """Step 5: the request for one attempt of one decision, from the events before it.

    A pure function of the log, the profile and the tools (the step's evidence and notifications are
    in the log already), so replay builds exactly the request the runner built. `store_prompt` keeps the prompt text in
    the artifact store; replay only needs its reference.
    """
    profile = trusted.profile
    pinned = view.pinned
    offered = offered_tools(rt, trusted, has_skills=bool(pinned and pinned.entries), view=view)
    transcript, summary = view.transcript, view.summary
    # The tools offered to the task stay in the prefix for all its requests, so that llama.cpp can
    # reuse it; what may be chosen at this step is narrowed in the grammar alone.
    prefix = prefix_blocks(profile, rt.tools.definitions(offered), skills=catalog_block(pinned))
    # A retry says why the last reply was refused; the history before the tail is the same either way.
    tail = context.tail_blocks(transcript, summary, call_index, attempt, view.last_rejection if attempt > 1 else "")
    window, max_output = rt.model.n_ctx, profile.max_output_tokens
    budget = context.budget_of(window, max_output)
    last = transcript.trimmed
    if last is not None and transcript.compaction is not None and last.call_index < transcript.compaction.call_index:
        # A cut counts the steps of the history it was made on; a compaction since made another history.
        last = None
    # The policy measures the request it settles on and assembly measures it again: the same text,
    # tokenized once.
    counted: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in counted:
            counted[text] = rt.model.count(text)
        return counted[text]

    chosen = policy_.parse(trusted.submitted.policy)
    # The notes no policy leaves out: after the stable prefix, or with `pinned_tail` just before the
    # decision asked for, where a new note breaks no cached prefix.
    head: tuple[Block, ...] = ()
    if chosen.notes and transcript.notes:
        if chosen.pinned_tail:
            tail = [*tail[:-1], notes.block(transcript.notes, "pinned"), tail[-1]]
        else:
            head = (notes.block(transcript.notes, "notes"),)
    shown = policy_.apply(
        chosen,
        transcript.entries,
        transcript.results,
        measure=lambda history: count(rt.model.render(context.layout(prefix, (*head, *history), tail))),
        budget=budget,
        count=count,
        # The cut recorded last, unless a re-assembly under another policy carries its own.
        cut=cut if cut is not None else policy_.Cut(last.elided, last.dropped) if last else policy_.Cut(),
        summary=(frozenset(transcript.compacted), transcript.summary) if transcript.summary is not None else None,
    )
    usable = choices_for(
        offered, view, attempt, kind,
        escalation=profile.escalation and (not profile.escalate_only_when_blocked or bool(view.calls.blocked)),
        contracts={name: rt.tools.get(name).contract for name in offered}, shown=shown,
        answer_after=profile.answer_after, call_first=profile.call_first, on_request=profile.on_request,
    )
    usable = dataclasses.replace(
        usable, attempt=attempt, said=instruction_texts(profile, [rt.tools.get(n).contract for n in offered], tail),
        changes_allowed=bool({"write", "external"} & set(trusted.submitted.allowed_effects)),
        contracts={name: rt.tools.get(name).contract for name in usable.tools},
    )
    schema = proposal.schema(
        {name: _arguments(rt.tools.get(name).contract, usable.narrowed(name)) for name in usable.tools},
        skills=list(usable.skills),
        allow_answer=usable.answer,
        citable=usable.sources,
        allow_escalate=usable.escalation,
        results=bool(transcript.results),
    )
    request = context.assemble(
        prefix=prefix,
        history=(*head, *shown.entries),
        step=transcript.calls + 1,
        tail=tail,
        render=rt.model.render,
        count=count,
        window=window,
        max_output=max_output,
        decision=kind,
        schema=schema,
        prompt_ref=(lambda text: rt.artifacts.put(text.encode())) if store_prompt else (
            lambda text: ref_for(text.encode())
        ),
        left_out=(*activation.catalog_left_out(pinned), *shown.left_out),
    )
    if shown.new_cut_from is not None:
        request = dataclasses.replace(request, trimmed=ContextTrimmed(
            call_index=call_index, elided=shown.cut.elided, dropped=shown.cut.dropped,
            tokens_before=shown.new_cut_from, tokens_after=request.manifest.total_tokens, budget=budget,
        ))
    return request, schema, usable


def _tokens(rt: Runtime, trusted: Trusted, view: TaskView, call_index: int, kind: str, budget: int) -> int:
    """The tokens of the decision's first request as the history stands, before any new cut `auto`
    would make of it; over the budget when it cannot be built at all."""
    try:
        request, _, _ = request_for(rt, trusted, view, call_index, 1, kind, store_prompt=False)
    except ContextOverflow:
        return budget + 1
    return request.trimmed.tokens_before if request.trimmed is not None else request.manifest.total_tokens


def _only_reads(contract: ToolContract) -> bool:
    return {e.value for e in contract.effects} <= {"read"}


def _path_kind(contract: ToolContract) -> str | None:
    """What a tool's `path` names: "read file" or "read folder" for a tool that only reads one that
    exists (reading again what the task holds unchanged is not offered), "file" for one that changes
    a file that exists, "new file" for one that writes a file that may not exist yet."""
    if contract.path_kind is not None:
        return f"read {contract.path_kind}" if _only_reads(contract) else contract.path_kind
    if not _only_reads(contract) and "path" in contract.input_model.model_fields:
        return "new file"
    return None


def _arguments(contract, values: Mapping[str, tuple[str, ...]]) -> dict:
    """A tool's argument schema for this step, each argument in `values` narrowed to those values: where
    the task knows every path there is, a path is one it may still usefully name, so no guessed path
    can be written; a command is one the request gave to run."""
    schema = inline_schema(contract.input_model)
    properties = dict(schema["properties"])
    for name, allowed in values.items():
        narrowed = {"type": "string", "enum": list(allowed)}
        if "description" in properties[name]:
            narrowed["description"] = properties[name]["description"]
        properties[name] = narrowed
    return {**schema, "properties": properties}


@dataclass(frozen=True)
class Choices:
    """What one attempt of one decision may propose: the grammar is built from it and the judge checks it."""

    tools: tuple[str, ...]
    skills: tuple[str, ...]
    sources: tuple[str, ...]
    escalation: bool = True
    # Per tool whose path is narrowed: the paths it may name at this step.
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Whether an answer may be given yet (the profile's `answer_after` tools have a result); why not, if not.
    answer: bool = True
    unanswerable: str = ""
    # Per tool that writes a path of its own choosing: the files there are whose content the task
    # has not seen, which it may not write over.
    unseen: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Per tool that runs a command: the commands it may run at this step, where they are narrowed.
    commands: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Per tool, any other argument narrowed at this step, with the values it may take.
    values: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    # The decision's last try: a refusal now fails the task, so only what code must refuse is refused.
    last: bool = False
    # Which try of the decision this is, and the instruction texts of its request (agentd's and the
    # tools' own words, which an answer may not copy).
    attempt: int = 1
    said: tuple[str, ...] = ()
    # Whether the task may change anything: only then is an answer's claim of a change checked.
    changes_allowed: bool = False
    # The contracts of the tools that may be called, for rules that read what a call would do.
    contracts: Mapping[str, ToolContract] = field(default_factory=dict)

    def narrowed(self, tool: str) -> dict[str, tuple[str, ...]]:
        """The arguments of `tool` whose values are narrowed at this step, with those values."""
        out = {"path": self.paths[tool]} if tool in self.paths else {}
        out = {**out, "command": self.commands[tool]} if tool in self.commands else out
        return {**out, **self.values.get(tool, {})}


def choices_for(
    offered: Sequence[str],
    view: TaskView,
    attempt: int,
    kind: str,
    *,
    escalation: bool = True,
    contracts: Mapping[str, ToolContract] | None = None,
    shown: policy_.Shown | None = None,
    answer_after: Sequence[str] = (),
    call_first: Sequence[str] = (),
    on_request: Mapping[str, Sequence[str]] | None = None,
) -> Choices:
    """Only what can be used now: skill files once a skill is active, artifacts once there are some,
    skills not yet taken in, paths the task may still usefully name; after a refusal, not the refused
    tool or skill; on the last step or the last try, only an answer (or an escalation, where the
    profile has one)."""
    contracts = contracts or {}
    # What the context policy left out of this request cannot be cited from it (an elided result keeps
    # its label and stays citable: the model read it, and the pointer says where it is).
    hidden = shown.dropped if shown else frozenset()
    sources = tuple(dict.fromkeys(c for c in view.transcript.citable if c not in hidden))
    if kind == "final_step" or attempt >= context.LAST_ATTEMPT:
        return Choices((), (), sources, escalation, last=attempt >= context.LAST_ATTEMPT)
    active = view.active
    request = goal.own_words(view.transcript.request)
    tools = [
        name
        for name in offered
        if not (name in activation.SKILL_TOOLS and not active)
        and not (name == "read_artifact" and not view.artifact_refs)
        and (name not in (on_request or {}) or _asked_for(name, on_request[name], request, view))
        and not (name in contracts and rules.question_changes_nothing(contracts[name], request))
    ]
    pinned = view.pinned
    skills = [e.name for e in pinned.entries if e.name not in active] if pinned else []
    if attempt > 1:
        refused = view.refused_proposal()
        if refused.get("action") == "call_tool":
            tool = refused.get("tool", "")
            repeated = proposal.call_key(tool, refused.get("arguments") or {}) in view.calls.done
            if repeated and tool in contracts:
                # A call made before, asked for again, is a model stuck in one mode. After a read, the
                # retry offers the changes and the answer (seen on the default model: the same read_file
                # after the file's content was in the request, step after step). After a change, only
                # the answer: offered the reads, the default model searched incidents after a rotation
                # had run and asked for the rotation again at the next step.
                reads = _only_reads(contracts[tool])
                tools = [t for t in tools if t in contracts and not _only_reads(contracts[t])] if reads else []
                if not reads:
                    # Offered the skills, the default model took in one unrelated skill after another
                    # instead (csv-summary and git-changes after a key rotation), then answered wrongly.
                    skills = []
            else:
                tools = [t for t in tools if t != tool]
        elif refused.get("action") == "activate_skill":
            skills = []
    paths: dict[str, tuple[str, ...]] = {}
    unseen: dict[str, tuple[str, ...]] = {}
    known = view.transcript.paths
    # A file whose content this request no longer shows may be read again.
    unread = shown.unread if shown else frozenset()
    if known.complete:
        held = known.read - unread
        changed = set(view.transcript.changed_paths)
        # A file is changed only once its content is in front of the model: read, or written by the
        # task. Measured on the default model: an edit_file before any read guessed the old text
        # ("debug_mode = true" for "debug = true"), and with every file offered, "Create a file
        # hello.txt" appended the request to docs/changelog.md.
        seen = (held | changed) & known.files
        pointed = relevance.focus(request, known.files)
        # Where the request points at files of its own, nothing changes before one of them was read:
        # the default model otherwise wrote next.txt, or appended to todo.txt, before it had read the
        # todo list the request was about.
        looked = pointed == known.files or bool(pointed & (known.read | changed))
        # New files the request names are written before any other file is changed: offered both, the
        # default model appended the rows it was to put in customers.txt to data/orders.csv.
        new = relevance.new_paths(request, known.files)
        for name in list(tools):
            kind = _path_kind(contracts[name]) if name in contracts else None
            if kind in ("file", "new file") and not looked:
                tools.remove(name)
                continue
            if kind == "new file" and not new:
                # A new file's name is free, unless the request names the new files it wants; writing
                # over a file not seen is refused by the judge.
                unseen[name] = tuple(sorted(known.files - seen))
                continue
            if kind is None:
                continue
            # Reading again what the task holds unchanged only repeats a result it has: a small model
            # otherwise rereads the file it should be answering from or changing, step after step.
            fresh = {
                "read file": pointed - held,
                "read folder": known.folders - known.listed,
                "file": set() if new else seen,
                "folder": known.folders,
                # Measured on the default model with the path free, "Create a file hello.txt" wrote
                # data/hello.txt.
                "new file": new,
            }[kind]
            if fresh:
                paths[name] = tuple(sorted(fresh))
            else:
                tools.remove(name)
    # A command the request gives to run is what runs first, as written: measured on the default model,
    # "Run `python3 src/app.py` and tell me what it prints" ran echo 'Hello, world!'.
    given = relevance.commands(request)
    commands: dict[str, tuple[str, ...]] = {}
    if given and not set(given) & _commands_run(view):
        commands = {t: given for t in tools if t in contracts and "command" in contracts[t].input_model.model_fields}
    values: dict[str, dict[str, tuple[str, ...]]] = {}
    left = names_left(view) if attempt > 1 and _NAMES_LEFT in view.last_rejection else None
    if left is not None and "edit_file" in tools:
        # An answer refused for the names an edit left: the retry changes those names in that file, or
        # answers (the request may have wanted them kept).
        tools = ["edit_file"]
        paths = {"edit_file": (left.path,)}
        values = {"edit_file": {"old": left.names}}
    # The calls a profile makes first come before anything else: no other tool, no answer, no escalation
    # (the task cannot yet know what it would escalate).
    pending = [t for t in call_first if t in tools and t not in view.calls.ran]
    if pending:
        why = f"call {pending[0]} first: everything else rests on its result"
        return Choices(tuple(pending), tuple(skills), sources, False, paths, answer=False, unanswerable=why,
                       unseen=unseen, commands=commands, values=values)
    # An answer waits for the results it must rest on, unless nothing is left that could give them.
    missing = [t for t in answer_after if t in tools and t not in view.calls.ran]
    why = f"call {missing[0]} first: the answer must rest on its result" if missing else ""
    return Choices(tuple(tools), tuple(skills), sources, escalation, paths, answer=not missing, unanswerable=why,
                   unseen=unseen, commands=commands, values=values)


def _commands_run(view: TaskView) -> set[str]:
    """The commands of the task's calls that have a result, whatever it was."""
    calls = view.calls
    return {c.arguments.get("command") for i, c in calls.proposed.items() if i in calls.finished} - {None}


def limit_reached(completion_tokens: int, max_output_tokens: int) -> int | None:
    """The limit a reply filled, if it filled it: from the recorded count, so a re-run judges alike."""
    return max_output_tokens if completion_tokens >= max_output_tokens else None


def _asked_for(tool: str, words: Sequence[str], request: str, view: TaskView | None) -> bool:
    """Whether a user's message (`request`, its own words) asks for what `tool` does, or a skill the
    user invoked names the tool. Documents, tool results and pasted text never count."""
    said = request.lower()
    if any(re.search(rf"\b{re.escape(w.lower())}", said) for w in words):
        return True
    active = view.active.values() if view else ()
    return any(s.by == "user" and re.search(rf"\b{re.escape(tool)}\b", s.body) for s in active)


def judge(text: str, choices: Choices, view: TaskView, cut_at: int | None = None) -> proposal.Action:
    """Step 7's first half: the reply as an action code will carry out, or Rejected with the reason.
    `cut_at`: the token limit the reply filled, if it did."""
    action = proposal.validate(
        proposal.parse(text, cut_at=cut_at),
        allowed_tools=set(choices.tools),
        skills=set(choices.skills),
        active_skills=set(view.active),
        sources=set(choices.sources),
        done_calls=view.calls.done,
        escalation=choices.escalation,
        paths=choices.paths,
        unanswerable=choices.unanswerable,
        unseen=choices.unseen,
        commands=choices.commands,
        values=choices.values,
    )
    if isinstance(action, proposal.CallTool) and action.tool in choices.contracts:
        adders = [n for n, c in choices.contracts.items() if c.changes == "path" and c.removes is None]
        why = removal.refusal(
            goal.own_words(view.transcript.request), choices.contracts[action.tool], action.arguments,
            view.records, adders,
        )
        if why is not None:
            raise proposal.Rejected(why)
    answer = action.answer if isinstance(action, proposal.FinalAnswer) else None
    if answer is not None and choices.changes_allowed:
        # A change claimed that the log does not hold is the worst answer there is: refused once, and if
        # claimed again (or on the last try) the task fails with the reason rather than complete.
        why = claims.unbacked(answer, view.records)
        if why is not None:
            if choices.last or (choices.attempt > 1 and _UNBACKED in view.last_rejection):
                raise proposal.Unbacked(why)
            raise proposal.Rejected(f"{why}; answer saying what was done and what was not")
    # A poor answer is still an answer: on the last try it stands, rather than fail a task whose work is
    # done (measured: refused on every try, it failed append_todo, fix_readme_typo and change_port after
    # their files were right).
    if answer is not None and not choices.last and (
        context.echoes_instructions(answer, view.last_rejection) or claims.copies(answer, choices.said)
    ):
        raise proposal.Rejected(
            "the answer repeats what you were told instead of answering; answer the request from the results, "
            "in a sentence of your own"
        )
    left = names_left(view)
    if answer is not None and not choices.last and left is not None and _NAMES_LEFT not in view.last_rejection:
        shown = "; ".join(left.lines.splitlines())
        raise proposal.Rejected(f"{left.path}{_NAMES_LEFT}: {shown}; change those too, or answer saying why they stay")
    return action


_NAMES_LEFT = " still uses a name your edit replaced"
_UNBACKED = "nothing was changed"


def instruction_texts(profile: Profile, contracts: Sequence[ToolContract], tail: Sequence[Block]) -> tuple[str, ...]:
    """agentd's own words in a request, which an answer may not copy: the profile's instructions (not its
    examples, whose answers are meant to be followed), each tool's description, the output contract and
    the decision asked for, without the user's request that the decision repeats."""
    texts = [profile.role, *profile.policy, *profile.tool_guidance, output_contract(profile.escalation)]
    texts += [c.description for c in contracts]
    for block in tail:
        if block.label == "decision":
            texts.append(block.text.split("\nThe request: ")[0] + "\n" + block.text.rpartition("\n")[2])
    return tuple(texts)


@dataclass(frozen=True)
class NamesLeft:
    """A file the task edited that still uses names the edit took out, and the lines that do."""

    path: str
    names: tuple[str, ...]
    lines: str


def names_left(view: TaskView) -> NamesLeft | None:
    """The file a task's edit left using a name it took out (edit_file's `old_names_left`), unless a
    later change to the file came after. An answer then is refused once, and the retry may change
    only those names: measured on the quality model, asked to rename `greet` and update its call, it
    renamed the definition, was shown the call left over, and answered that both were done; told so,
    it made the same edit again."""
    left: dict[str, NamesLeft | None] = {}
    for rec in view.records:
        e = rec.event
        path = e.observation.get("path") if isinstance(e, ToolCallExecuted) and e.status == "ok" else None
        if not isinstance(path, str):
            continue
        lines = e.observation.get("old_names_left")
        if e.tool == "edit_file" and lines and e.call_id in view.calls.proposed:
            arguments = view.calls.proposed[e.call_id].arguments
            gone = edits.replaced_names(str(arguments.get("old", "")), str(arguments.get("new", "")))
            names = tuple(sorted(n for n in gone if re.search(rf"\b{re.escape(n)}\b", lines)))
            left[path] = NamesLeft(path, names, lines) if names else None
        elif e.tool in ("edit_file", "write_file", "append_file"):
            left[path] = None
    return next((found for found in left.values() if found), None)




def decided_line(records: Sequence[Recorded], call_index: int) -> str:
    """One line on what a decision came to, from its events: for people watching, never recorded."""
    refusals = 0
    line = "no decision"
    started = False
    what = ""
    for rec in records:
        e = rec.event
        if isinstance(e, ModelCalled) and e.call_index == call_index:
            started = True
        if not started:
            continue
        if isinstance(e, ProposalRejected) and e.call_index == call_index:
            refusals += 1
        elif isinstance(e, ToolCallProposed):
            # The first short text argument (a path, a command) says which call it was.
            shown = next((v for v in e.arguments.values() if isinstance(v, str)), "")
            what = f"{e.tool} {shown[:60]}".rstrip()
            line = f"proposed {what}"
        elif isinstance(e, ApprovalRequested):
            line = f"{what or e.tool} waits for approval ({e.approval_id})"
        elif isinstance(e, ToolCallExecuted):
            line = f"called {what or e.tool} -> {e.status}"
        elif isinstance(e, AnswerGiven):
            line = "answered"
        elif isinstance(e, TaskEscalated):
            line = f"escalated: {e.reason}"
        elif isinstance(e, SkillActivated) and e.call_index == call_index:
            line = f"took in skill {e.name}"
        elif isinstance(e, TaskPhaseChanged) and e.phase == TaskPhase.FAILED:
            line = f"failed: {e.reason}"
    if refusals:
        line += f" (after {refusals} refused {'reply' if refusals == 1 else 'replies'})"
    return line


def _decision_kind(summary, step: int) -> str:
    """Step 2: every decision chooses the next action; the last one allowed for the user's latest
    message must answer it."""
    return "final_step" if step >= summary.max_steps else "next_step"

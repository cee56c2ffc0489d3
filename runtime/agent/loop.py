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

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Mapping, Sequence

import anyio

from notifications import queue
from runtime import logs
from runtime.agent import compaction, context, decide, goal, notes, policy as policy_, progress as progress_, proposal
from runtime.agent.choices import judge, limit_reached
from runtime.agent.decide import arguments_hash  # noqa: F401  the page checks approvals with it
from runtime.agent.host import Runtime, Trusted
from runtime.agent.profiles import catalog_counter
from runtime.agent.progress import Progress
from runtime.agent.request import (
    match_content,
    memory_scope,
    offered_tools,
    request_for,
    request_tokens,
    retrieve_evidence,
)
from runtime.agent.view import TaskView
from runtime.errors import ContextOverflow, InferenceError
from runtime.skills import activation
from runtime.tools import (
    ToolContext,
    ToolContract,
    ToolOutcome,
    ToolRefused,
    execute,
    preview,
    recording,
    screen,
    snapshot,
)
from runtime.tools.memory import FACT_MEMORY
from runtime.tools.workspace import survey
from store.errors import AgentdError, ConcurrencyConflict
from store.events import (
    AnswerGiven,
    ApprovalRequested,
    CompactionFailed,
    ContextCompacted,
    EvidenceRetrieved,
    FileChanged,
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
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
    WorkspaceSurveyed,
)

log = logs.get_logger("agentd.agent")


# The repeat penalty of a retry after a runaway reply (llama.cpp's, over the last 64 tokens).
RUNAWAY_PENALTY = 1.3
MAX_CONFLICTS = 3


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
            # step reads the log again and goes on from what is there now. Said, because a decision was
            # taken for nothing; between workers, it means two ran one task (their leases allow none).
            log.info("appended to first by another writer; reading the task again", task_id=task_id)
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
        self.vault = rt.secrets.vault(rt.store, task_id)

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
        """Append with the version we last saw: if anyone else moved the task, this fails, not them.

        Every event is recorded with its secrets hidden: a line of a file the first request matched, a
        skill's body, what a tool returned. The view extends with what was recorded, so the requests
        built from it show placeholders too."""
        hidden = await anyio.to_thread.run_sync(self.vault.hide_events, events)
        recorded = await self.rt.store.append_async(
            self.task_id, hidden, expected_version=self.view.version, actor="agentd"
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
            await self._pin_mcp_tools(trusted)
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
        unrecorded = confirm = screened = None
        if contract is not None and isinstance(action, proposal.CallTool):
            screened = await self._screen(trusted, action)
            if screened is None:
                unrecorded = await self._unrecordable(trusted, contract, action.arguments)
                if trusted.submitted.confirm_changes or trusted.profile.confirm_changes:
                    confirm = await self._confirmation(trusted, action)
        await self._carry_out(trusted, decide.act(
            view, call_index, action, contract, self._policy(trusted), unrecorded, confirm, screened
        ))

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

    async def _pin_mcp_tools(self, trusted: Trusted) -> None:
        """Before the first request: the MCP tools the task is offered, as their servers listed them, so
        that its requests show them so to its end and a call of one changed since is refused."""
        if self.rt.mcp is None or self.view.mcp_pinned is not None:
            return
        offered = offered_tools(self.rt, trusted, has_skills=bool(self.view.pinned and self.view.pinned.entries))
        pinned = self.rt.mcp.pin(offered)
        if pinned is not None:
            await self._append(pinned)

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
            facts={**self.view.facts, FACT_MEMORY: memory_scope(self.rt, trusted)},
            protected=self.rt.protected,
            secrets=self.vault,
        )

    async def _retrieve(self, trusted: Trusted, call_index: int) -> None:
        """Steps 3 and 4, recorded with the evidence's text so the task's later requests repeat it."""
        items, left_out = retrieve_evidence(self.rt, trusted, self.view.transcript)
        # Recorded when all was left out as well: what was considered, and why none of it was shown.
        if items or left_out:
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
                action = judge(completion.text, choices, self.view, cut, self.rt.artifacts.find)
            except proposal.Rejected as e:
                await self._append(ProposalRejected(call_index=call_index, attempt=attempt, error=str(e)))
                if isinstance(e, proposal.Unbacked):
                    await self._give_up(call_index, str(e), may_hand_over=isinstance(e, proposal.Unanswered))
                    return None
                # Told its reply was too long, the default model wrote the same runaway (a tab 300 times,
                # a CSV's rows past its end) again: greedy decoding repeats itself unless made not to.
                penalty = RUNAWAY_PENALTY if cut is not None else penalty
                continue
            await self._append(ProposalAccepted(call_index=call_index, action=action.model_dump(mode="json")))
            return action
        await self._give_up(
            call_index,
            f"the model's proposal was refused {context.LAST_ATTEMPT} times at step {call_index}, the last time "
            f"with only an answer or an escalation to choose: {self.view.last_rejection}",
            may_hand_over=True,
        )
        return None

    async def _give_up(self, call_index: int, reason: str, *, may_hand_over: bool) -> None:
        """The end of a task no reply of the model's could carry further: handed to a person where the log
        shows a blocked call (decide.hand_over), else failed with `reason`. A claimed change that did not
        happen never goes to a person: it fails the task."""
        handed = decide.hand_over(self.view) if may_hand_over else None
        if handed is None:
            await self._fail(reason)
            return
        log.info("task handed over", task_id=self.task_id, call_index=call_index)
        await self._append(*handed.events)

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
        before = request_tokens(self.rt, trusted, view, call_index, kind, budget)
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
            provisional_view = TaskView.of([*view.records, provisional])
            after = request_tokens(self.rt, trusted, provisional_view, call_index, kind, budget)
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

    async def _screen(self, trusted: Trusted, action: proposal.CallTool) -> ToolOutcome | None:
        """The refusal of a call that its arguments or its tool's own checks refuse, before it may wait
        for a person or be recorded; None for a call that may go on."""
        tool = self.rt.tools.get(action.tool)
        ctx = self._tool_context(trusted)
        return await anyio.to_thread.run_sync(lambda: screen(tool, ctx, action.arguments))

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

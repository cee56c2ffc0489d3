"""Scoped sub-tasks: `delegate` hands one question to a task of its own that sees only what it is given.

Seed 003's sub-agent. The parent names the question, the scope (ids of data blocks it was shown: a
result, a file it read, an evidence item, something the user pasted), the tools the sub-task may
use and a token budget; nothing else reaches the sub-task. It runs as a task with its own log and
manifests (`<parent>.<call>`), its goal the question with the scoped material pasted in as data, and
returns a typed result that the parent's next request shows as the call's result. The parent's
manifest holds the step (what was delegated) and the result (what came back), so a wrong answer can be
traced to what the sub-task was shown, in the sub-task's own manifests.

Rights are checked in code: a sub-task gets only tools the parent is offered, never one that needs a
person's approval, never `delegate` itself, and the parent's allowed effects at most. The call is
idempotent: after a crash it resumes the same sub-task rather than starting another.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from runtime.agent.host import Trusted
from runtime.agent.loop import run_task
from runtime.agent.request import offered_tools
from runtime.agent.view import TaskView
from runtime.harness.tasks import submit_task
from runtime.tools import Effect, Tool, ToolContext, ToolContract, ToolFailure, ToolRefused, ToolRegistry
from store import NO_STREAM
from store.errors import ConcurrencyConflict
from store.events import AnswerGiven, TaskEscalated, TaskPhaseChanged

if TYPE_CHECKING:
    from runtime.agent.loop import Runtime

TOOL_NAME = "delegate"
# A sub-task answers one question: a few steps are enough, and its cost stays visible in the parent's.
SUB_TASK_STEPS = 8
MAX_BUDGET = 60_000


class DelegateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=2000, description="what the sub-task must find out or do")
    scope: list[str] = Field(
        default_factory=list, max_length=8,
        description="ids of <data> blocks you were shown that the sub-task may read (e.g. result:c2)",
    )
    tools: list[str] = Field(default_factory=list, max_length=8, description="the tools the sub-task may use")
    token_budget: int = Field(20_000, ge=1_000, le=MAX_BUDGET, description="tokens the sub-task may spend")


class DelegateResult(BaseModel):
    sub_task_id: str
    phase: Literal["completed", "failed", "cancelled", "escalated", "waiting"]
    answer: str = ""
    sources: list[str] = []
    steps: int
    tokens: int


ERRORS = {
    "tool_not_allowed": "the sub-task was given a tool this task may not use, or one that needs approval",
    "unknown_scope": "the scope names a block this task was not shown",
}


class Delegate(Tool[DelegateArgs, DelegateResult]):
    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self.contract = ToolContract(
            name=TOOL_NAME,
            description=(
                "Hand one question to a sub-task that sees only the blocks you list in scope and uses only "
                "the tools you list, and get its answer back as this call's result."
            ),
            input_model=DelegateArgs,
            output_model=DelegateResult,
            # Itself it only reads; every call the sub-task makes is checked in its own loop, with the
            # parent's effects at most.
            effects=(Effect.READ,),
            idempotent=True,
            scope="task",
            timeout_s=3600,
            errors=ERRORS,
            mask_output=False,
        )

    def bind(self, runtime: Runtime) -> None:
        """The runtime whose store, model and tools the sub-tasks use (it holds this tool too)."""
        self.runtime = runtime

    def authorize(self, ctx: ToolContext, args: DelegateArgs) -> None:
        trusted, view = self._parent(ctx)
        usable = set(offered_tools(self._rt, trusted)) - {TOOL_NAME}
        for name in args.tools:
            if name not in usable or self._rt.tools.get(name).contract.needs_approval:
                raise ToolRefused(
                    "tool_not_allowed",
                    f"the sub-task cannot have {name!r}; "
                    f"it can have: {', '.join(sorted(self._plain(usable))) or 'none'}",
                )
        shown = {b.label for b in view.transcript.entries if b.trust == "untrusted"}
        unknown = [s for s in args.scope if s not in shown]
        if unknown:
            raise ToolRefused("unknown_scope", f"{unknown[0]!r} is not a block this task was shown")

    def run(self, ctx: ToolContext, args: DelegateArgs) -> DelegateResult:
        trusted, view = self._parent(ctx)
        call_id = next(c for c, tool in view.calls.open().items() if tool == TOOL_NAME)
        sub_id = f"{ctx.task_id}.{call_id}"
        blocks = {b.label: b for b in view.transcript.entries}
        # The scoped material pasted into the question: the sub-task's request fences it as data.
        pasted = "".join(f"\n~~~ {label}\n{blocks[label].text}\n~~~" for label in args.scope)
        # A secret crosses with its value and comes back the same way: each task's placeholders are numbered
        # by its own vault, so the parent's [secret:2] would name another value (or none) in the sub-task.
        # The question reaches here with its values put back; the pasted blocks are put back here, and the
        # sub-task's vault hides them all again before anything is recorded.
        goal = args.question + (ctx.secrets.reveal(pasted) if ctx.secrets is not None else pasted)
        events = submit_task(
            goal, Path(trusted.submitted.workspace), tenant=trusted.tenant,
            profile=trusted.submitted.profile, allowed_effects=trusted.submitted.allowed_effects,
            max_steps=SUB_TASK_STEPS, max_tokens=args.token_budget, policy=trusted.submitted.policy,
        )
        events[0] = events[0].model_copy(update={"tools": tuple(args.tools), "parent": ctx.task_id})
        sub_vault = self._rt.secrets.vault(self._rt.store, sub_id)
        events = sub_vault.hide_events(events)
        try:
            self._rt.store.append(sub_id, events, expected_version=NO_STREAM, actor=f"task:{ctx.task_id}")
        except ConcurrencyConflict:
            pass  # submitted before a crash: this call resumes it
        # The tool runs in a thread of its own, outside the parent's event loop (which waits for it): the
        # sub-task gets an event loop of its own there. The model serves one call at a time either way.
        phase = anyio.run(run_task, self._rt, sub_id)
        result = _result(sub_id, phase, self._rt.store.read_stream(sub_id), self._rt.store.task(sub_id).summary)
        # The answer's placeholders are the sub-task's: their values go back, and the executor hides them
        # again with the parent's numbers before the result is recorded or shown.
        if ctx.secrets is None:
            return result
        return result.model_copy(update={"answer": sub_vault.reveal(result.answer)})

    def check(self, output: DelegateResult) -> None:
        if output.phase == "waiting":
            raise ToolFailure("sub_task_waiting", f"the sub-task {output.sub_task_id} stopped before it answered")

    @property
    def _rt(self) -> Runtime:
        if self.runtime is None:
            raise ToolFailure("not_bound", "delegation is not available in this process")
        return self.runtime

    def _parent(self, ctx: ToolContext) -> tuple[Trusted, TaskView]:
        records = self._rt.store.read_stream(ctx.task_id)
        view = TaskView.of(records)
        submitted = view.submitted
        profile = self._rt.profiles[submitted.event.profile]
        return Trusted(ctx.task_id, submitted.actor, submitted.event.tenant, datetime.now(UTC),
                       submitted.event, profile), view

    def _plain(self, names: set[str]) -> list[str]:
        return [n for n in names if not self._rt.tools.get(n).contract.needs_approval]


def _result(sub_id: str, phase: str, records, s) -> DelegateResult:
    answer, sources, escalated = "", [], False
    for rec in records:
        e = rec.event
        if isinstance(e, AnswerGiven):
            answer, sources = e.answer, list(e.sources)
        elif isinstance(e, TaskEscalated):
            answer, escalated = e.reason, True
    known = {"completed", "failed", "cancelled"}
    shown = "escalated" if escalated else phase if phase in known else "waiting"
    if shown == "failed":
        answer = next(r.event.reason for r in reversed(records) if isinstance(r.event, TaskPhaseChanged))
    return DelegateResult(
        sub_task_id=sub_id, phase=shown, answer=answer, sources=sources, steps=s.steps, tokens=s.tokens_used
    )


def is_sub_task(task_id: str) -> bool:
    """Whether the task is a sub-task (`<parent>.<call>`; task ids have no dot of their own)."""
    return "." in task_id


def register_delegation(tools: ToolRegistry) -> Delegate:
    """Offer `delegate` (a profile still has to list it); bind it to the runtime once there is one."""
    tool = Delegate()
    tools.register(tool)
    return tool

"""`remember`: the model's proposal of a memory, which code checks and records as a hypothesis.

Whom it is about, whose data it is and what it is for come from the task (its authenticated actor, its
tenant, its profile), never from the model's arguments, which hold only the text. What a model says is
recorded as `model_inferred`, whatever it claims the user said: it loads labelled as a hypothesis, and
stops loading at its purpose's retention or, where the settings give none, at a review date. The text is
redacted before it is recorded, like any memory's (`write.recorded`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from runtime.errors import InvalidCommand
from runtime.memory.load import INFERRED
from runtime.memory.redact import Pattern
from runtime.memory.retention import default_expiry
from runtime.memory.write import recorded
from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure, ToolRefused

# The trusted fact a task's tool context carries for this tool (see `Scope`); without it there is no
# subject to remember anything of, as in `agentd tool run` outside a task.
FACT_MEMORY = "memory_scope"
# Where the settings keep a purpose's memories for no set time, a person looks at a model's memory within
# this many days, or it stops loading: a hypothesis nobody vouched for does not last.
REVIEW_DAYS = 30
MAX_TEXT = 500


@dataclass(frozen=True)
class Scope:
    """What a task's memories are for and how long they last, from its profile and the settings."""

    purpose: str
    retention_days: Mapping[str, int]
    patterns: Sequence[Pattern] = ()


class RememberArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_TEXT, description="the one fact to keep, as a sentence")


class RememberOutput(BaseModel):
    memory_id: str
    purpose: str
    source: str = Field(description="model_inferred: a hypothesis until a person records it as a fact")
    text: str = Field(description="as recorded, with secrets and personal data taken out")
    expires_at: str | None = None
    review_at: str | None = None
    redacted: list[str] = Field(default_factory=list, description="the kinds of data taken out of the text")


class Remember(Tool[RememberArgs, RememberOutput]):
    contract = ToolContract(
        name="remember",
        description=(
            "Keep one fact about the user for their later tasks, when they ask you to remember it. It is "
            "kept as your own inference, to be confirmed by a person; it changes no file."
        ),
        input_model=RememberArgs,
        output_model=RememberOutput,
        effects=[Effect.MEMORY],
        # Each call records a memory of its own: run twice, it would be remembered twice.
        idempotent=False,
        scope="subject",
        timeout_s=5,
        preconditions=("the user asked for it to be remembered",),
        errors={
            "no_subject": "the call runs outside a task, so there is no one to remember it of",
            "not_recorded": "the memory failed a check (blank once redacted, say)",
        },
        summary_fields=("memory_id", "purpose", "source", "expires_at", "review_at", "redacted"),
    )

    def authorize(self, ctx: ToolContext, args: RememberArgs) -> None:
        if not isinstance(ctx.facts.get(FACT_MEMORY), Scope):
            raise ToolRefused("no_subject", "there is no task whose user this could be remembered for")

    def run(self, ctx: ToolContext, args: RememberArgs) -> RememberOutput:
        scope: Scope = ctx.facts[FACT_MEMORY]
        now = datetime.now(UTC)
        expires = default_expiry(scope.purpose, now, scope.retention_days)
        try:
            event, kinds = recorded(
                subject=ctx.actor, tenant=ctx.tenant, purpose=scope.purpose, text=args.text, source=INFERRED,
                expires_at=expires, review_at=None if expires else now + timedelta(days=REVIEW_DAYS), now=now,
                patterns=scope.patterns,
            )
        except InvalidCommand as e:
            raise ToolFailure("not_recorded", str(e)) from None
        # Appended with the call's result, in the task's stream: which task and call proposed it stays known.
        ctx.record(event)
        return RememberOutput(
            memory_id=event.memory_id, purpose=event.purpose, source=event.source, text=event.text,
            expires_at=event.expires_at, review_at=event.review_at, redacted=list(kinds),
        )

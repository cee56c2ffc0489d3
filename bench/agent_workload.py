"""The agent benchmark's workload: a paging tool, the profiles that offer it, scripted replies, timed assembly.

A 135M model will not write 40 distinct, valid tool calls in a row, so the reply *text* is scripted:
`ScriptedReplies` sends every request to the real model (prompt processing, schema-constrained
generation, the real `CallStats`) and then hands the loop the scripted call `next_page(page=N)` for the
task's N-th decision instead of what the model wrote. The loop, the log and every figure stay real.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field

import runtime.agent.loop
from runtime.inference.model import Completion, Message
from runtime.inference.local import LocalModel
from runtime.agent.profiles import Profile
from runtime.tools import Tool, ToolContract

TOOL = "next_page"
REPLY_TOKENS = 48
"""The bench profiles' max_output_tokens: a little more than the scripted reply's ~30 tokens."""

SERVICES = ("billing", "search", "checkout", "login", "mail", "reports", "uploads", "payments")


# -- the tool --------------------------------------------------------------------------------------


class NextPageArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    page: int = Field(ge=1, description="the page to read, starting at 1")


class NextPageOutput(BaseModel):
    entry: str


class NextPage(Tool[NextPageArgs, NextPageOutput]):
    """One short, deterministic entry of an incident log per page.

    In the prompt its observation takes about 60 tokens, half of them the runtime's `<data>` fence.
    """

    contract = ToolContract(
        name=TOOL,
        description="Read one page of the incident log; pages are numbered from 1.",
        input_model=NextPageArgs,
        output_model=NextPageOutput,
        effects=(),
        idempotent=True,
        scope="task",
        timeout_s=5.0,
    )

    def run(self, ctx, args: NextPageArgs) -> NextPageOutput:
        service = SERVICES[args.page % len(SERVICES)]
        return NextPageOutput(entry=f"{service}: {1000 + 37 * args.page} requests, {args.page % 5} errors")


# -- the profiles ----------------------------------------------------------------------------------

ROLE = (
    "You are agentd's log reader. You read an incident log one page at a time with next_page, "
    "then say what went wrong."
)

PAGES = Profile(
    name="bench-pages",
    role=ROLE,
    policy=("Read the pages in order; do not skip one.",),
    tool_guidance=("next_page returns one entry of the log per call.",),
    tools=(TOOL,),
    max_output_tokens=REPLY_TOKENS,
)


def stamped(profile: Profile, now: datetime | None = None) -> Profile:
    """The naive loop's profile: the same, with the current time at the top of the system message."""
    stamp = (now or datetime.now(UTC)).isoformat(timespec="milliseconds")
    return profile.model_copy(update={"role": f"Current time: {stamp}. {profile.role}"})


def goal(index: int) -> str:
    """A different goal per task, as different users' tasks have."""
    return f"Read the incident log of the {SERVICES[index % len(SERVICES)]} team page by page and report."


# -- the model -------------------------------------------------------------------------------------


def scripted_reply(page: int) -> str:
    reply = {"action": "call_tool", "tool": TOOL, "arguments": {"page": page}, "reason": f"read page {page}"}
    return json.dumps(reply, separators=(",", ":"))


class ScriptedReplies:
    """The real model for every request, with the reply text replaced by the task's next scripted call.

    The KV cache therefore ends each call holding what the model generated, while the transcript holds
    the scripted reply: the next request matches the cache up to the start of that reply and is
    evaluated from there on.
    """

    def __init__(self, real: LocalModel) -> None:
        self.real = real
        self.name = real.name
        self.n_ctx = real.n_ctx
        self.decisions: dict[str | None, int] = defaultdict(int)

    def render(self, messages: Sequence[Message]) -> str:
        return self.real.render(messages)

    def tokenize(self, text: str) -> list[int]:
        return self.real.tokenize(text)

    def count(self, text: str) -> int:
        return self.real.count(text)

    def _scripted(self, completion: Completion, session: str | None) -> Completion:
        self.decisions[session] += 1
        return Completion(scripted_reply(self.decisions[session]), completion.stats, completion.finish_reason)

    def complete(
        self, prompt: str, *, schema: dict | None, max_tokens: int, session: str | None = None, progress=None
    ) -> Completion:
        real = self.real.complete(prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress)
        return self._scripted(real, session)

    async def acomplete(
        self, prompt: str, *, schema: dict | None, max_tokens: int, session: str | None = None, progress=None
    ) -> Completion:
        real = await self.real.acomplete(
            prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress
        )
        return self._scripted(real, session)

    def stats(self) -> dict[str, Any]:
        return self.real.stats()


# -- timing the assembly ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Assembly:
    task_id: str
    call_index: int
    seconds: float


@contextlib.contextmanager
def timed_assembly() -> Iterator[list[Assembly]]:
    """Time every `build_request` the loop makes (rebuild from the log, assemble, manifest, token counts).

    `runtime.agent` looks `build_request` up in its module when a decision is taken, so a wrapper put
    there for the duration of the block sees exactly the calls the loop makes, with their arguments.
    """
    original = runtime.agent.loop.build_request
    timings: list[Assembly] = []

    def timed(rt, trusted, records, call_index, *args, **kwargs):
        started = time.perf_counter()
        result = original(rt, trusted, records, call_index, *args, **kwargs)
        timings.append(Assembly(trusted.task_id, call_index, time.perf_counter() - started))
        return result

    runtime.agent.loop.build_request = timed
    try:
        yield timings
    finally:
        runtime.agent.loop.build_request = original

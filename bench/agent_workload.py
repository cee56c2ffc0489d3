"""The agent benchmark's workload: a paging tool, the profiles that offer it, scripted replies, timed assembly.

A 135M model will not write 40 distinct, valid tool calls in a row, so the reply *text* is scripted:
`scripted_model` sends every request to the real model (prompt processing, schema-constrained
generation, the real `CallStats`) and then hands the loop the scripted call `next_page(page=N)` for the
task's N-th decision instead of what the model wrote. The loop, the log and every figure stay real.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Iterator

from pydantic import BaseModel, ConfigDict, Field

import runtime.agent.loop
from runtime.agent.profiles import Profile
from runtime.inference.local import LocalModel
from runtime.inference.scripted import ScriptedModel
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


def scripted_model(real: LocalModel, tasks: int, turns: int) -> ScriptedModel:
    """The real model for every request, with the reply text replaced by the task's next scripted call.

    The bench drives its tasks round-robin, one decision each per round, so the script is each round's
    call once per task. The KV cache therefore ends each call holding what the model generated, while
    the transcript holds the scripted reply: the next request matches the cache up to the start of that
    reply and is evaluated from there on.
    """
    replies = [scripted_reply(turn) for turn in range(1, turns + 1) for _ in range(tasks)]
    return ScriptedModel(replies, like=real, generate=True, name=real.name)


# -- timing the assembly ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Assembly:
    task_id: str
    call_index: int
    seconds: float


@contextlib.contextmanager
def timed_assembly() -> Iterator[list[Assembly]]:
    """Time every `request_for` the loop makes (assemble from the task's folded view, manifest, token
    counts); the fold itself is kept up to date as events are appended, outside this time.

    `runtime.agent.loop` looks `request_for` up in its module when a decision is taken, so a wrapper put
    there for the duration of the block sees exactly the calls the loop makes, with their arguments.
    """
    original = runtime.agent.loop.request_for
    timings: list[Assembly] = []

    def timed(rt, trusted, view, call_index, *args, **kwargs):
        started = time.perf_counter()
        result = original(rt, trusted, view, call_index, *args, **kwargs)
        timings.append(Assembly(trusted.task_id, call_index, time.perf_counter() - started))
        return result

    runtime.agent.loop.request_for = timed
    try:
        yield timings
    finally:
        runtime.agent.loop.request_for = original

"""Context assembly: the request for one decision, rebuilt from the log, with its manifest.

The request is an append-only transcript: the stable prefix (one system message), then per decision a
user turn (task state, new evidence, notifications, the decision asked for), the model's reply, and
the tool result. Every earlier request of the task is therefore a prefix of the next one, which is
what keeps llama.cpp's KV cache warm. Everything here is a pure function of the task's events and the
profile, so replay can rebuild any request and compare it with what was recorded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from runtime import goal as goal_text
from runtime.activation import failure_block, skill_block
from runtime.blocks import Block, neutralize
from runtime.inference import Message
from store.errors import ContextOverflow
from store.events import (
    ContextManifest,
    EvidenceRetrieved,
    LeftOut,
    ManifestItem,
    ModelCalled,
    NotificationsAdmitted,
    ProposalRejected,
    Recorded,
    SkillActivated,
    SkillActivationFailed,
    TaskSubmitted,
    TokenBuckets,
    ToolCallExecuted,
)
from store.state import TaskSummary, evolve, is_task_event

# Tokens the chat template spends around the reply (the assistant header llama.cpp adds at the end).
PROTOCOL_OVERHEAD = 16


@dataclass(frozen=True)
class Turn:
    """One message of the transcript and the blocks it was made of (none for the model's replies)."""

    role: str
    blocks: tuple[Block, ...] = ()
    text: str | None = None

    def content(self) -> str:
        if self.text is not None:
            return self.text
        return "\n\n".join(b.render() for b in self.blocks)


@dataclass
class Transcript:
    """The task's conversation so far, rebuilt from its events."""

    turns: list[Turn] = field(default_factory=list)
    evidence_ids: list[str] = field(default_factory=list)
    # Blocks recorded for the next request (its evidence, the notifications admitted into it) that no
    # request has shown yet.
    pending: list[Block] = field(default_factory=list)
    read_paths: list[str] = field(default_factory=list)
    # The ids of the data blocks the model has been shown, in order: what a final answer may cite.
    citable: list[str] = field(default_factory=list)
    calls: int = 0
    last_manifest: ContextManifest | None = None


def rebuild(records: Iterable[Recorded]) -> tuple[Transcript, TaskSummary | None]:
    """Replay a task's events into the turns the model has been shown, and the task's state now."""
    t = Transcript()
    summary: TaskSummary | None = None
    submitted: TaskSubmitted | None = None
    rejected: str | None = None
    for rec in records:
        e = rec.event
        if isinstance(e, TaskSubmitted):
            submitted = e
            t.citable += [b.label for b in goal_text.blocks(e.goal) if b.trust == "untrusted"]
        elif isinstance(e, EvidenceRetrieved):
            t.pending += [evidence_block(item) for item in e.items]
            t.evidence_ids += [item.cite for item in e.items]
            t.citable += [item.cite for item in e.items]
        elif isinstance(e, NotificationsAdmitted):
            t.pending.append(notifications_block(e))
        elif isinstance(e, SkillActivated):
            t.pending.append(skill_block(e))
        elif isinstance(e, SkillActivationFailed):
            t.pending.append(failure_block(e))
        elif isinstance(e, ProposalRejected):
            rejected = e.error
        elif isinstance(e, ModelCalled):
            if e.attempt == 1:
                t.turns.append(Turn("user", tuple(user_turn(summary, e.call_index, submitted, t.pending))))
                t.pending = []
            else:
                t.turns.append(Turn("user", (rejection_block(rejected or "rejected", e.attempt, submitted),)))
            t.turns.append(Turn("assistant", text=e.output))
            t.calls = max(t.calls, e.call_index)
            t.last_manifest = e.manifest or t.last_manifest
        elif isinstance(e, ToolCallExecuted):
            t.turns.append(Turn("tool", (observation_block(e),)))
            t.citable.append(f"result:{e.call_id}")
            path = e.observation.get("path")
            if e.status == "ok" and isinstance(path, str) and e.tool == "read_file":
                t.read_paths.append(path)
                t.citable.append(path)
        if is_task_event(rec):
            summary = evolve(summary, rec)
    return t, summary


def user_turn(
    summary: TaskSummary | None,
    call_index: int,
    submitted: TaskSubmitted | None,
    evidence: list[Block],
) -> list[Block]:
    blocks: list[Block] = []
    if call_index == 1 and submitted is not None:
        # The user's request is the task's instruction; what they pasted into it is data.
        blocks += goal_text.blocks(submitted.goal)
    if summary is not None:
        facts = submitted.context if submitted is not None else {}
        blocks.append(Block("task_state", "task_state", "store", "trusted", state_text(summary, call_index, facts)))
    blocks += evidence
    blocks.append(
        Block("decision", "instruction", "agentd", "trusted", decision_text(summary, call_index, submitted))
    )
    return blocks


def state_text(s: TaskSummary, call_index: int, facts: Mapping[str, str] = {}) -> str:
    return (
        f"task {s.task_id}, step {call_index} of at most {s.max_steps}, phase {s.phase}, "
        f"tokens used {s.tokens_used} of {s.max_tokens}"
        + (f", tests {s.test_status}" if s.test_status else "")
        + "".join(f"\n{key}: {value}" for key, value in facts.items())
    )


def decision_text(s: TaskSummary | None, call_index: int, submitted: TaskSubmitted | None = None) -> str:
    # From the second step on, the request is said again next to the newest results: a small model
    # otherwise loses the question behind a long tool output and repeats its last call (seed 000: keep
    # the current task and decision close to the evidence they refer to).
    request = f"The request: {restated(submitted)}\n" if call_index > 1 and submitted is not None else ""
    if s is not None and call_index >= s.max_steps:
        return request + "This is the last step allowed: give the final answer now."
    return request + (
        "Decide the next step: if the results above answer the request, give the final answer, with the ids "
        "of the <data> blocks you used as sources; if not, call one tool."
    )


def restated(submitted: TaskSubmitted | None) -> str:
    """The request's own words (pasted parts stay where they were shown, as data)."""
    return goal_text.blocks(submitted.goal)[0].text if submitted is not None else ""


def evidence_block(item) -> Block:
    # Shown under its cite, the id the runbook and skills tell the model to cite.
    return Block(item.cite, "evidence", item.source, "untrusted", item.text, item.version)


NOTIFICATION_LINES = 20


def notifications_block(e: NotificationsAdmitted) -> Block:
    """The drained notifications as one block at the tail: harness facts, in enqueue order.

    At most NOTIFICATION_LINES of them are spelled out: a burst (a checkout touching every file the
    task read) must not crowd out the task itself. The rest are admitted all the same, and counted.
    """
    lines = [f"- [{i.source}/{i.kind}] {i.text}" for i in e.items[:NOTIFICATION_LINES]]
    if len(e.items) > NOTIFICATION_LINES:
        lines.append(
            f"- and {len(e.items) - NOTIFICATION_LINES} more; `agentd notifications list --task` shows them all"
        )
    ids = ",".join(i.notification_id for i in e.items)
    return Block("notifications", "notification", f"queue:{ids}", "trusted", neutralize("\n".join(lines)))


def observation_block(e: ToolCallExecuted) -> Block:
    body = json.dumps({"status": e.status, **e.observation}, sort_keys=True, ensure_ascii=False)
    return Block(f"result:{e.call_id}", "observation", f"tool:{e.tool}", "untrusted", body)


def rejection_block(error: str, attempt: int, submitted: TaskSubmitted | None = None) -> Block:
    """Why the last reply was refused, and what the retry (`attempt`) may still choose."""
    if attempt >= LAST_ATTEMPT:
        then = (
            f"This is the last try for this step. The request: {restated(submitted)}\n"
            "Give the final answer from the results above."
        )
    else:
        then = "Choose again: one JSON object, a different action than the one refused."
    return Block("rejected", "instruction", "agentd", "trusted", f"Your last reply was not carried out: {error}. {then}")


# A refused proposal is retried with a narrower choice, down to only answering or escalating on the
# last try, before the decision (and the task) fails.
LAST_ATTEMPT = 3


@dataclass(frozen=True)
class Request:
    """One assembled request: the messages, the exact prompt text, and the manifest of what is in it."""

    messages: tuple[Message, ...]
    prompt: str
    manifest: ContextManifest
    blocks: tuple[Block, ...]


def assemble(
    *,
    prefix: Sequence[Block],
    transcript: Transcript,
    tail: Sequence[Block],
    render: Callable[[Sequence[Message]], str],
    count: Callable[[str], int],
    window: int,
    max_output: int,
    decision: str,
    schema: dict,
    prompt_ref: Callable[[str], str],
    left_out: Sequence[LeftOut] = (),
) -> Request:
    """Lay out prefix + transcript + this decision's tail, measure it, and refuse rather than truncate."""
    system = Turn("system", tuple(prefix))
    turns = [system, *transcript.turns, Turn("user", tuple(tail))]
    messages = tuple(Message(t.role, t.content()) for t in turns)
    prompt = render(messages)
    total = count(prompt)
    budget = window - max_output - PROTOCOL_OVERHEAD
    if total > budget:
        raise ContextOverflow(
            f"the request for step {transcript.calls + 1} needs {total} tokens but the budget is {budget} "
            f"(window {window} - output {max_output} - overhead {PROTOCOL_OVERHEAD}); "
            "instructions and task state are never cut, so the task stops here"
        )
    blocks = [b for t in turns for b in t.blocks]
    items = tuple(_item(b, count) for b in _in_prompt_order(turns))
    prefix_text = render(messages[:1])
    manifest = ContextManifest(
        decision=decision,
        items=items,
        total_tokens=total,
        prefix_tokens=count(prefix_text),
        prefix_sha256=hashlib.sha256(prefix_text.encode()).hexdigest(),
        buckets=buckets(messages, prefix, render, count, total),
        window=window,
        max_output=max_output,
        overhead=PROTOCOL_OVERHEAD,
        budget=budget,
        left_out=tuple(left_out),
        prompt_ref=prompt_ref(prompt),
        schema_sha256=hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest(),
    )
    return Request(messages, prompt, manifest, tuple(blocks))


def _in_prompt_order(turns: list[Turn]) -> Iterable[Block]:
    for t in turns:
        if t.blocks:
            yield from t.blocks
        else:
            # The model's earlier replies are in the prompt too: untrusted, as anything a model wrote.
            yield Block("reply", "observation", "model", "untrusted", t.text or "")


def _item(b: Block, count: Callable[[str], int]) -> ManifestItem:
    return ManifestItem(
        block=b.label, kind=b.kind, source=b.source, trust=b.trust, version=b.version, sha256=b.sha256,
        tokens=count(b.render()),
    )


def buckets(
    messages: Sequence[Message],
    prefix: Sequence[Block],
    render: Callable[[Sequence[Message]], str],
    count: Callable[[str], int],
    total: int,
) -> TokenBuckets:
    """Seed 003's four counts and three subtractions, with the model's own template and tokenizer."""
    without_tools = "\n\n".join(b.render() for b in prefix if b.kind != "tool")
    system_with_tools = count(render(messages[:1]))
    system_only = count(render([Message("system", without_tools)]))
    no_results = count(render([m for m in messages if m.role != "tool"]))
    tool_results = total - no_results
    return TokenBuckets(
        system=system_only,
        tool_definitions=system_with_tools - system_only,
        tool_results=tool_results,
        conversation=total - system_with_tools - tool_results,
        total=total,
    )


def prefix_break(previous: ContextManifest | None, current: ContextManifest) -> str | None:
    """The first block of the previous request that this one does not repeat in the same place."""
    if previous is None:
        return None
    for old, new in zip(previous.items, current.items):
        if (old.block, old.sha256) != (new.block, new.sha256):
            return old.block
    if len(current.items) < len(previous.items):
        return previous.items[len(current.items)].block
    return None

"""Where a task's tokens went, call by call, from its recorded manifests (seed 003's accounting).

Each request's four buckets (system, tool definitions, tool results, conversation) were measured
with the model's own chat template and tokenizer when it was assembled; this adds what its context
policy left out, and the session's running totals: tokens billed (every prompt token, as an API
provider would charge) and tokens evaluated (what llama.cpp computed after reusing its cached prefix).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from store.events import CompactionFailed, ContextCompacted, ModelCalled, NoteTaken, Recorded, ToolCallProposed


@dataclass(frozen=True)
class CallTokens:
    call_index: int
    attempt: int
    system: int
    tool_definitions: int
    tool_results: int
    conversation: int
    total: int
    left_out: int
    billed: int  # running total of prompt tokens, this call included
    evaluated: int  # running total of evaluated tokens, this call included


@dataclass(frozen=True)
class Accounting:
    calls: tuple[CallTokens, ...]
    billed: int
    evaluated: int
    # Tokens the requests spent describing tools the task never called.
    unused_tool_definitions: int
    unused_tools: tuple[str, ...]
    # The summarizer's calls (policy `compact`): how many, the tokens they read and wrote.
    compactions: int = 0
    compaction_prompt_tokens: int = 0
    compaction_completion_tokens: int = 0
    # The note-taker's calls (policy `notes`), one per user message.
    notes: int = 0
    note_prompt_tokens: int = 0
    note_completion_tokens: int = 0


def account(records: Sequence[Recorded]) -> Accounting:
    called_tools = {r.event.tool for r in records if isinstance(r.event, ToolCallProposed)}
    rows: list[CallTokens] = []
    billed = evaluated = unused = 0
    offered: dict[str, None] = {}
    compactions = compaction_in = compaction_out = 0
    noted = note_in = note_out = 0
    for rec in records:
        e = rec.event
        if isinstance(e, (ContextCompacted, CompactionFailed)):
            compactions += 1
            compaction_in += e.prompt_tokens
            compaction_out += e.completion_tokens
        if isinstance(e, NoteTaken):
            noted += 1
            note_in += e.prompt_tokens
            note_out += e.completion_tokens
        if not isinstance(e, ModelCalled):
            continue
        billed += e.prompt_tokens
        # An endpoint that does not report them leaves them None: the prompt less what was reused from
        # the cache is what they are (as the local model counts them).
        evaluated += e.evaluated_tokens if e.evaluated_tokens is not None else e.prompt_tokens - (e.cached_tokens or 0)
        m = e.manifest
        if m is None or m.buckets is None:
            rows.append(CallTokens(e.call_index, e.attempt, 0, 0, 0, 0, e.prompt_tokens, 0, billed, evaluated))
            continue
        for item in m.items:
            if item.kind == "tool":
                name = item.block.removeprefix("tool:")
                offered[name] = None
                if name not in called_tools:
                    unused += item.tokens
        b = m.buckets
        rows.append(CallTokens(
            e.call_index, e.attempt, b.system, b.tool_definitions, b.tool_results, b.conversation, b.total,
            sum(x.tokens for x in m.left_out), billed, evaluated,
        ))
    return Accounting(
        tuple(rows), billed, evaluated, unused, tuple(t for t in offered if t not in called_tools),
        compactions, compaction_in, compaction_out, noted, note_in, note_out,
    )

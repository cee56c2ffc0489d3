"""The context policies side by side on one long session: what each sends, what it costs, what it keeps.

One scripted session per policy, all with the same script and window (n_ctx 8192 by default):

- the user asks the agent to go through a project's notes; at decision 2 they add a standing rule and
  at decision 19 a fact (messages of theirs, `task say`), as seed 003 planted them at turns 2 and 19;
- the file read at decision 19 holds an identifier too: a fact that came from a tool, not the user;
- every decision reads one more file, of a length drawn (deterministically) from 40 to 900 words,
  as real files vary; the last decision answers.

For each policy it prints: decisions completed, tokens billed (every prompt token) and evaluated
(after prefix reuse), evaluated as a multiple of the tokens the session added (its history at the
end), the largest request, compactions and their tokens, prefix reuse on the calls between rewrites
(tokens found cached / the previous request's tokens, on calls that broke no prefix), wall time, and
whether the rule, the fact and the file's identifier were in every request after they appeared.

The decisions' replies are scripted: the point is what each policy sends, not the model's judgement.
Without --model a stand-in tokenizer counts, and prefix reuse is what llama.cpp would reuse (the
longest token prefix shared with the session's previous prompt); the summarizer (policy `compact`)
is scripted too and keeps nothing specific, so what survives is what the policy keeps verbatim, and
the note-taker (`+notes`) keeps each message's sentence that holds a number. With --model the real
model evaluates every prompt (real reuse, real wall time) and writes the summaries and notes itself,
under their schemas: then the file's identifier survives a compaction only if the model kept it.
Figures only, no assertions.

    python bench/policy_bench.py
    python bench/policy_bench.py --decisions 60 --policy auto --policy compact --model qwen2.5-coder-0.5b
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from runtime.agent import compaction, notes
from runtime.agent.blocks import join
from runtime.agent.loop import Runtime, run_task
from runtime.agent.plugins import load
from runtime.agent.view import TaskView
from runtime.artifacts import ArtifactStore
from runtime.harness.tasks import say, submit_task
from runtime.inference.local import LocalModel
from runtime.inference.model_file import resolve_model
from runtime.inference.scripted import ScriptedModel
from store import NO_STREAM, EventStore
from store.events import CompactionFailed, ContextCompacted, ModelCalled, NoteTaken, TaskPhaseChanged

POLICIES = ["full", "window:8", "elide_tool_results:4", "user_verbatim:1", "auto", "compact", "auto+notes",
            "auto+pinned_tail", "compact+notes"]
RULE = "Standing rule: every ticket you open is filed under my employee number 4417."
FACT = "The affected shard is pay-shard-7, confirmed by the payments team."
IDENTIFIER = "INC-40417"
RULE_AT, IDENTIFIER_AT = 2, 19
GENERIC_SUMMARY = {
    "session_goal": "go through the project's notes",
    "decisions": "read the notes one by one, in order",
    "rejected_options": "none",
    "open_questions": "none",
    "next_steps": "read the remaining notes, then answer",
}


class BenchModel(ScriptedModel):
    """The session's scripted replies; the summarizer's and the note-taker's from the real model when
    there is one. The decisions' prompts are kept apart: they are the requests whose content is judged."""

    def complete(self, prompt, *, schema, max_tokens, session=None, progress=None, repeat_penalty=1.0):
        if schema not in (compaction.SCHEMA, notes.SCHEMA):
            self.decision_prompts.append(prompt)
        elif self.like is not None and self.evaluate:
            return self.like.complete(prompt, schema=schema, max_tokens=max_tokens, session=session)
        else:
            self.replies.insert(
                0, json.dumps(GENERIC_SUMMARY) if schema == compaction.SCHEMA else stand_in_note(prompt)
            )
        return super().complete(prompt, schema=schema, max_tokens=max_tokens, session=session, progress=progress)


def stand_in_note(prompt: str) -> str:
    """The message's line that holds a number, or none: what a note-taker that works would keep."""
    message = prompt.rsplit("<|im_start|>user", 1)[1]
    kept = [line for line in message.splitlines() if any(c.isdigit() for c in line) and not line.startswith("Message ")]
    return json.dumps({"note": kept[0] if kept else "NONE"})


def lay_out(workspace: Path, decisions: int) -> list[str]:
    rng = random.Random(7)
    names = []
    for i in range(1, decisions):
        words = rng.randint(40, 900)
        text = " ".join(f"w{i}-{j % 97}" for j in range(words))
        if i == IDENTIFIER_AT:
            text = f"The incident this project tracks is {IDENTIFIER}. " + text
        name = f"notes/n{i:03}.md"
        (workspace / name).parent.mkdir(exist_ok=True)
        (workspace / name).write_text(text + "\n")
        names.append(name)
    return names


def run_policy(spec: str, decisions: int, n_ctx: int, like: LocalModel | None, root: Path, evaluate: bool) -> dict:
    folder = root / spec.replace(":", "-")
    workspace = folder / "ws"
    workspace.mkdir(parents=True)
    names = lay_out(workspace, decisions)
    replies = [{"action": "call_tool", "tool": "read_file", "arguments": {"path": n}} for n in names]
    replies.append({"action": "final_answer", "answer": "Read them all.", "sources": []})
    model = BenchModel(replies, like=like, evaluate=like is not None and evaluate, n_ctx=n_ctx)
    model.decision_prompts = []
    with EventStore(f"sqlite:///{folder / 'agentd.db'}", synchronous="off") as store:
        loaded = load([])
        rt = Runtime(store=store, model=model, tools=loaded.tools, profiles=loaded.profiles,
                     artifacts=ArtifactStore(folder / "artifacts"), protected=(folder / "data",))
        task_id = "t-bench"
        store.append(task_id, submit_task(
            "Go through the notes of this project, one file at a time.", workspace, policy=spec,
            max_steps=decisions + 5, max_tokens=10**9,
        ), expected_version=NO_STREAM, actor="bench")
        started = time.perf_counter()
        done, phase = 0, "running"
        for at, text in ((RULE_AT, RULE), (IDENTIFIER_AT, FACT)):
            phase = anyio.run(lambda at=at, done=done: run_task(rt, task_id, max_decisions=at - 1 - done))
            if phase != "running":  # a policy that fails at the window stops before the user says more
                break
            done = at - 1
            records = store.read_stream(task_id)
            store.append(task_id, say(records, text), expected_version=records[-1].stream_version, actor="bench")
        else:
            phase = anyio.run(lambda: run_task(rt, task_id))
        seconds = time.perf_counter() - started
        records = store.read_stream(task_id)
    events = [r.event for r in records]
    calls = [e for e in events if isinstance(e, ModelCalled)]
    compactions = [e for e in events if isinstance(e, (ContextCompacted, CompactionFailed))]
    # Between rewrites, how much of the previous request llama.cpp found in its cache (its tail, the
    # decision asked for, is never repeated, so 100 % is out of reach by that much).
    # Each call with the one before it: one pair fewer than calls.
    steady = [
        (c, p) for p, c in zip(calls, calls[1:], strict=False) if not c.prefix_break and c.cached_tokens is not None
    ]
    history = TaskView.of(records).transcript.entries
    added = model.count(join(list(history))) + (calls[0].manifest.prefix_tokens if calls and calls[0].manifest else 0)
    prompts = model.decision_prompts
    kept = {name: _kept(prompts, text) for name, text in (("rule", RULE), ("fact", FACT), ("identifier", IDENTIFIER))}
    evaluated = sum(c.evaluated_tokens or 0 for c in calls)
    return {
        "policy": spec,
        "phase": phase,
        "reason": next((e.reason for e in reversed(events) if isinstance(e, TaskPhaseChanged)), ""),
        "decisions": len({c.call_index for c in calls}),
        "billed": sum(c.prompt_tokens for c in calls),
        "evaluated": evaluated,
        "added": added,
        "largest": max((c.prompt_tokens for c in calls), default=0),
        "compactions": sum(isinstance(e, ContextCompacted) for e in compactions),
        "failed_compactions": sum(isinstance(e, CompactionFailed) for e in compactions),
        "compaction_tokens": sum(e.prompt_tokens + e.completion_tokens for e in compactions),
        "reuse": sum(c.cached_tokens for c, _ in steady) / max(sum(p.prompt_tokens for _, p in steady), 1),
        "seconds": seconds,
        "kept": kept,
        "notes": sum(isinstance(e, NoteTaken) for e in events),
        "note_tokens": sum(e.prompt_tokens + e.completion_tokens for e in events if isinstance(e, NoteTaken)),
    }


def _kept(prompts: list[str], text: str) -> bool | None:
    """Whether `text` was in every decision's request from the first that showed it; None when no
    request showed it (the task stopped before it was said)."""
    start = next((i for i, p in enumerate(prompts) if text in p), None)
    return None if start is None else all(text in p for p in prompts[start:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--policy", action="append", help="a policy to run (repeatable; default: all)")
    parser.add_argument("--model", help="a known model name or GGUF path: real prompts, reuse and summaries")
    parser.add_argument("--count-only", action="store_true",
                        help="with --model: its template and tokenizer only; reuse as llama.cpp would find it, "
                        "the summarizer and note-taker scripted (minutes, where evaluating is hours on 2 cores)")
    args = parser.parse_args()
    like = None
    if args.model:
        like = LocalModel(resolve_model(args.model, None), args.n_ctx)
    rows = []
    with tempfile.TemporaryDirectory(prefix="policy-bench-") as tmp:
        for spec in args.policy or POLICIES:
            print(f"running {spec} ...", file=sys.stderr, flush=True)
            rows.append(run_policy(spec, args.decisions, args.n_ctx, like, Path(tmp), not args.count_only))
    counted = (f"the model {args.model}" + (" (template and tokenizer only)" if args.count_only else "")
               if args.model else "a stand-in tokenizer (no model)")
    print(f"{args.decisions} decisions, n_ctx {args.n_ctx}, counted with {counted}\n")
    head = ["POLICY", "DONE", "BILLED", "EVALUATED", "EVAL/ADDED", "LARGEST", "COMPACTIONS", "NOTES",
            "THEIR TOKENS", "REUSE", "SECONDS", "RULE", "FACT", "FILE ID"]
    table = [head] + [[
        r["policy"], f"{r['decisions']}/{args.decisions}" + ("" if r["phase"] == "completed" else f" ({r['phase']})"),
        f"{r['billed']:,}", f"{r['evaluated']:,}", f"{r['evaluated'] / max(r['added'], 1):.2f}x", f"{r['largest']:,}",
        f"{r['compactions']}" + (f" (+{r['failed_compactions']} failed)" if r["failed_compactions"] else ""),
        str(r["notes"]), f"{r['compaction_tokens'] + r['note_tokens']:,}", f"{r['reuse']:.0%}", f"{r['seconds']:.1f}",
        *({True: "kept", False: "lost", None: "-"}[r["kept"][k]] for k in ("rule", "fact", "identifier")),
    ] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for r in rows:
        if r["phase"] != "completed":
            print(f"\n{r['policy']}: {r['phase']}: {r['reason']}")


if __name__ == "__main__":
    main()

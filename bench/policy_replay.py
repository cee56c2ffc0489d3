"""Seed 003's replay: one recorded 40-turn session, its last request built under every policy, probed.

1. Record once. A conversation about an incident, under `compact+notes`: at each turn the user says
   something, the agent reads one log file and answers (those decisions are scripted); the summaries and
   the notes are the real model's, under their schemas. At turn 2 the user states a standing rule (their
   employee number, 4417, on every ticket); at turn 19 a fact (the affected shard is pay-shard-7). The
   logs are full of look-alikes: other shard names, other four-digit numbers, `pool_exhausted`.
2. Replay. For each probe (turn 40, asked in several phrasings), the request for the next decision is
   built from the same recorded events under each policy, so the messages, calls and results are
   byte-identical across rows and the only variable is what each policy chose to keep. The control row is
   a request holding only the two planted messages and the probe.
3. The real model answers each request under its own schema (an answer or an escalation only, as at a
   task's last step), and the answer is scored: does it hold 4417, does it hold pay-shard-7.

Greedy decoding is deterministic, so one phrasing gives an unrepeatable yes or no and several give a
rate. Figures only, no assertions.

    python bench/policy_replay.py                         # default model, 3 phrasings per probe
    python bench/policy_replay.py --phrasings 6 --model qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import anyio

from policy_bench import BenchModel
from runtime.agent.host import Runtime, Trusted
from runtime.agent.loop import run_task
from runtime.agent.plugins import load
from runtime.agent.request import request_for
from runtime.agent.rerun import history_under
from runtime.agent.view import TaskView
from runtime.artifacts import ArtifactStore
from runtime.errors import ContextOverflow
from runtime.harness.tasks import say, submit_task
from runtime.inference.local import LocalModel
from runtime.inference.model_file import resolve_model
from store import NO_STREAM, EventStore
from store.events import ContextCompacted, NoteTaken, TaskSubmitted, UserSaid

TURNS = 40
RULE = "Standing rule for this session: every ticket you open must be filed under my employee number, 4417."
FACT = "Update from the payments team: the affected shard is pay-shard-7, confirmed."
POLICIES = ["full", "window:8", "elide_tool_results:4", "user_verbatim:4", "auto", "compact", "compact+notes",
            "auto+notes", "auto+pinned_tail"]
PROBES = {
    "rule": [
        "Open the incident ticket now. Which employee number must it be filed under? Answer with the number.",
        "Under which employee number do the tickets you open go?",
        "What number did I ask you to put on every ticket?",
        "Before you file it: whose employee number goes on the ticket? Give the number.",
        "Tell me the employee number that tickets in this session are filed under.",
        "Which four-digit employee number is the ticket filed under?",
    ],
    "fact": [
        "Open the incident ticket now. Which shard is affected? Answer with the shard's name.",
        "Which payment shard did the payments team confirm as affected?",
        "Name the affected shard for the ticket.",
        "What is the affected shard in this incident?",
        "For the ticket's summary: which shard is it?",
        "Which shard should the ticket name as affected?",
    ],
}
EXPECTED = {"rule": "4417", "fact": "pay-shard-7"}
CHATTER = [
    "Anything new in the next log?", "Keep going, what does this one show?", "Is latency still climbing?",
    "Look at the next one, please.", "Do you see retries in this one?", "What about errors here?",
]


def lay_out(workspace: Path) -> list[str]:
    """One log per turn, each full of look-alikes: shard names, four-digit numbers, pool_exhausted;
    and for each the answer an agent that read it would give (varied, as real answers are: 38 copies
    of one sentence would teach the model to repeat it, which is not what is measured here)."""
    rng = random.Random(3)
    (workspace / "logs").mkdir(parents=True)
    answers = []
    for turn in range(1, TURNS):
        lines = []
        for j in range(rng.randint(8, 24)):
            shard = f"pay-shard-{rng.choice([1, 2, 3, 4, 5, 6, 8, 9])}"
            lines.append(
                f"2026-11-30T10:{turn:02}:{j:02}Z pay-api {rng.choice(['WARN', 'ERROR', 'INFO'])} shard={shard} "
                f"req={rng.randint(1000, 9999)} latency_ms={rng.randint(40, 2400)} "
                f"{rng.choice(['pool_exhausted', 'retrying', 'timeout', 'ok'])}"
            )
        (workspace / "logs" / f"turn{turn:02}.log").write_text("\n".join(lines) + "\n")
        errors = sum(" ERROR " in line for line in lines)
        slowest = max(lines, key=lambda line: int(line.split("latency_ms=")[1].split()[0]))
        answers.append(f"turn{turn:02}.log has {len(lines)} lines, {errors} of them errors; the slowest request "
                       f"was {slowest.split('req=')[1].split()[0]} on {slowest.split('shard=')[1].split()[0]}.")
    return answers


def record(like: LocalModel, folder: Path) -> tuple[EventStore, Runtime, str]:
    """The 39 turns before the probe, recorded under `compact+notes` with the real summarizer and note-taker."""
    workspace = folder / "ws"
    answers = lay_out(workspace)
    replies = []
    for turn in range(1, TURNS):
        replies += [{"action": "call_tool", "tool": "read_file", "arguments": {"path": f"logs/turn{turn:02}.log"}},
                    {"action": "final_answer", "answer": answers[turn - 1], "sources": []}]
    model = BenchModel(replies, like=like, evaluate=False, n_ctx=like.n_ctx)
    model.decision_prompts = []
    store = EventStore(f"sqlite:///{folder / 'agentd.db'}", synchronous="off")
    loaded = load([])
    rt = Runtime(store=store, model=model, tools=loaded.tools, profiles=loaded.profiles,
                 artifacts=ArtifactStore(folder / "artifacts"), protected=(folder / "data",))
    task_id = "t-replay"
    store.append(task_id, submit_task("Help me work through the pay-api incident, one log at a time.", workspace,
                                      policy="compact+notes", conversation=True, max_tokens=10**9),
                 expected_version=NO_STREAM, actor="bench")
    anyio.run(lambda: run_task(rt, task_id))
    for turn in range(2, TURNS):
        text = RULE if turn == 2 else FACT if turn == 19 else CHATTER[turn % len(CHATTER)]
        records = store.read_stream(task_id)
        store.append(task_id, say(records, text), expected_version=records[-1].stream_version, actor="bench")
        phase = anyio.run(lambda: run_task(rt, task_id))
        if phase != "waiting_for_user":
            raise SystemExit(f"the recording stopped at turn {turn}: {phase}")
    return store, rt, task_id


def probe_records(records, question: str):
    """The recorded events and one more message of the user's: the probe."""
    last = records[-1]
    return [*records, last._replace(seq=last.seq + 1, stream_version=last.stream_version + 1,
                                    event=UserSaid(text=question))]


def control_records(records, question: str):
    """The control: the task as submitted, the two planted messages and the probe, nothing else."""
    first = records[0]
    said = [first]
    for text in (RULE, FACT, question):
        said.append(first._replace(seq=said[-1].seq + 1, stream_version=said[-1].stream_version + 1,
                                   event=UserSaid(text=text)))
    return said


def ask(rt: Runtime, like: LocalModel, trusted: Trusted, records, spec: str, session: str) -> tuple[int, str]:
    """The request under `spec` for the decision after the probe, and the model's answer to it."""
    # The task as if submitted under `spec`: the policy a request is built under is the task's own.
    trusted = dataclasses.replace(trusted, submitted=trusted.submitted.model_copy(update={"policy": spec}))
    view = TaskView.of(history_under(records, spec))
    call_index = view.transcript.calls + 1
    request, schema, _ = request_for(rt, trusted, view, call_index, 1, "final_step", store_prompt=False)
    completion = like.complete(request.prompt, schema=schema, max_tokens=trusted.profile.max_output_tokens,
                               session=session)
    try:
        reply = json.loads(completion.text)
    except json.JSONDecodeError:
        return request.manifest.total_tokens, completion.text
    return request.manifest.total_tokens, str(reply.get("answer") or reply.get("reason") or completion.text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="a known model name or GGUF path")
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--phrasings", type=int, default=3, choices=range(1, 7), help="phrasings per probe (1-6)")
    parser.add_argument("--policy", action="append", help="a policy to replay (repeatable; default: all)")
    args = parser.parse_args()
    like = LocalModel(resolve_model(args.model, None), args.n_ctx)
    with tempfile.TemporaryDirectory(prefix="policy-replay-") as tmp:
        started = time.perf_counter()
        print("recording the 39 turns (real summaries and notes) ...", file=sys.stderr, flush=True)
        store, rt, task_id = record(like, Path(tmp))
        records = store.read_stream(task_id)
        recorded_s = time.perf_counter() - started
        submitted: TaskSubmitted = records[0].event
        trusted = Trusted(task_id, "bench", submitted.tenant, datetime.now(UTC), submitted,
                          rt.profiles[submitted.profile])
        summaries = [r.event for r in records if isinstance(r.event, ContextCompacted)]
        notes = [r.event for r in records if isinstance(r.event, NoteTaken) and r.event.note]
        rows = []
        for spec in [*(args.policy or POLICIES), "control"]:
            print(f"probing {spec} ...", file=sys.stderr, flush=True)
            scores, tokens, wrong = {}, 0, []
            for probe, questions in PROBES.items():
                hits = 0
                for question in questions[: args.phrasings]:
                    built = (
                        control_records(records, question) if spec == "control" else probe_records(records, question)
                    )
                    try:
                        tokens, answer = ask(rt, like, trusted, built, "auto" if spec == "control" else spec,
                                             session=f"probe/{spec}")
                    except ContextOverflow:
                        tokens, answer = 0, "(over the window)"
                    ok = EXPECTED[probe] in answer
                    hits += ok
                    if not ok:
                        wrong.append(f"{probe}: {answer[:80]!r}")
                scores[probe] = hits
            rows.append((spec, tokens, scores, wrong))
        store.close()
    n = args.phrasings
    print(f"\n{TURNS} turns, n_ctx {args.n_ctx}, model {args.model}; recorded in {recorded_s:.0f} s with "
          f"{len(summaries)} summaries and {len(notes)} notes kept")
    for e in notes:
        print(f"  note of {e.message}: {e.note}")
    kept = [s for s in summaries if "pay-shard-7" in json.dumps(s.sections)]
    print(f"  summaries that name pay-shard-7: {len(kept)} of {len(summaries)}\n")
    head = ["POLICY", "REQUEST TOKENS", f"RULE (/{n})", f"FACT (/{n})"]
    table = [head] + [[spec, f"{tokens:,}" if tokens else "over", str(s["rule"]), str(s["fact"])]
                      for spec, tokens, s, _ in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print("\nwrong answers:")
    for spec, _, _, wrong in rows:
        for w in wrong:
            print(f"  {spec}: {w}")


if __name__ == "__main__":
    main()

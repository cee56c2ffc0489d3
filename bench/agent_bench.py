"""Benchmark of the agent loop on the local model: prefix reuse over a long task, alone and interleaved.

In one run on one machine, each case on a freshly loaded model (the default qwen2.5-coder-0.5b unless --model
names another) and a temporary event store, with the bench's `next_page` tool and profile:

    1. one task        --turns decisions (default 40), KV state LRU of --kv-cache-mib (default 768)
    2. four tasks      interleaved round-robin on one model, --turns decisions each: every call
                       switches tasks, so each task's prefix comes back from the LRU
    3. four tasks      the same without the LRU (kv_cache_bytes=0), for --no-lru-turns rounds
    4. naive loop      case 1 with the current time at the top of the system message, so the prefix
                       breaks on every call and the whole prompt is evaluated again

Per case: prompt tokens, tokens actually evaluated and their ratio to the final context length, the
share of prompt tokens reused from turn 2 on, time to first token at turn 1 and at the last turn, and
the time `request_for` takes per decision next to the model call. Every model figure is read back
from the recorded `ModelCalled` events. The reply text is scripted (see bench/agent_workload.py): the
model still evaluates every prompt and generates a reply each turn.

It prints the figures with the targets marked "met" or "not met" and writes bench/results/agent.json.
Timings are reported, never asserted. See bench/README.md ("Agent loop").

    python bench/agent_bench.py --quick         # 8 turns: a smoke run, a few minutes
    python bench/agent_bench.py                 # 40 turns: about 30 minutes on 2 cores
    python bench/agent_bench.py --turns 20 --no-lru-turns 20
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from agent_workload import PAGES, NextPage, goal, scripted_model, stamped, timed_assembly
from provenance import git, save, version
from runtime import logs
from runtime.agent.loop import Runtime, run_task
from runtime.agent.plugins import load
from runtime.artifacts import ArtifactStore
from runtime.harness.tasks import submit_task
from runtime.inference.local import LocalModel
from runtime.inference.model_file import resolve_model
from runtime.inference.scripted import ScriptedModel
from store import NO_STREAM, EventStore
from store.events import ModelCalled, ProposalRejected

HERE = Path(__file__).resolve().parent
DEFAULT_TURNS = 40
QUICK_TURNS = 8
DEFAULT_NO_LRU_TURNS = 10
INTERLEAVED_TASKS = 4
DEFAULT_KV_CACHE_MIB = 768
"""Case 2 keeps 3 tasks' states while the 4th runs: at 40 turns each is ~7,770 tokens x 23 KB = ~171 MiB,
513 MiB for the three, just over agentd's default of 512 MiB."""
TASK_TOKEN_CAP = 1_000_000  # the token cap is not what is measured here

NAIVE = PAGES.model_copy(update={"name": "bench-naive"})

TARGET_EVALUATED_OVER_FINAL = 1.15
TARGET_REUSE_ONE = 0.95
TARGET_REUSE_INTERLEAVED = 0.90
TARGET_ASSEMBLY_SHARE = 0.02


@dataclasses.dataclass(frozen=True)
class Case:
    key: str
    title: str
    tasks: int
    turns: int
    kv_cache_bytes: int
    naive: bool = False


# -- running a case ---------------------------------------------------------------------------------


def run_case(case: Case, args: argparse.Namespace) -> dict:
    """Run `case` on a freshly loaded model and a new store; return its per-decision rows and totals."""
    progress(f"{case.title}: loading the model")
    model = LocalModel(args.model, kv_cache_bytes=case.kv_cache_bytes, n_threads=args.threads)
    try:
        with tempfile.TemporaryDirectory(prefix="agentd-agent-bench-") as folder, \
                EventStore(f"sqlite:///{Path(folder) / 'agentd.db'}") as store:
            rt = make_runtime(store, scripted_model(model, case.tasks, case.turns), Path(folder))
            task_ids = [submit(store, Path(folder), i, case) for i in range(case.tasks)]
            with timed_assembly() as assembly, logs.captured() as logged:
                walls = anyio.run(drive, rt, task_ids, case)
            result = collect(store, task_ids, assembly, walls)
            result["prefix_break_warnings"] = sum(1 for e in logged if e.get("event") == "prefix break")
            result["kv_cache"] = model.stats()["kv_cache"]
            result["n_ctx"] = model.n_ctx
    finally:
        model.close()
    result["case"] = dataclasses.asdict(case)
    result["summary"] = summarize(result["tasks"])
    return result


def make_runtime(store: EventStore, model: ScriptedModel, folder: Path) -> Runtime:
    loaded = load([])
    loaded.tools.register(NextPage())
    return Runtime(
        store=store,
        model=model,
        tools=loaded.tools,
        profiles={**loaded.profiles, PAGES.name: PAGES, NAIVE.name: stamped(NAIVE)},
        artifacts=ArtifactStore(folder / "artifacts"),
        protected=(folder / "artifacts",),
    )


def submit(store: EventStore, folder: Path, index: int, case: Case) -> str:
    """Submit task `index`: its own workspace and goal, a step cap one above the turns to run."""
    workspace = folder / f"workspace-{index + 1}"
    workspace.mkdir()
    task_id = f"bench-{index + 1}"
    events = submit_task(
        goal(index),
        workspace,
        profile=NAIVE.name if case.naive else PAGES.name,
        max_steps=case.turns + 1,
        max_tokens=TASK_TOKEN_CAP,
    )
    store.append(task_id, events, expected_version=NO_STREAM, actor="bench")
    return task_id


async def drive(rt: Runtime, task_ids: list[str], case: Case) -> dict[tuple[str, int], float]:
    """One decision per task per round, round-robin; the wall time of each decision by (task, turn)."""
    walls: dict[tuple[str, int], float] = {}
    started = time.perf_counter()
    for turn in range(1, case.turns + 1):
        for task_id in task_ids:
            if case.naive:
                rt.profiles[NAIVE.name] = stamped(NAIVE)
            began = time.perf_counter()
            await run_task(rt, task_id, max_decisions=1)
            walls[(task_id, turn)] = time.perf_counter() - began
        if turn == 1 or turn % 5 == 0 or turn == case.turns:
            progress(f"  turn {turn}/{case.turns} done, {time.perf_counter() - started:.0f} s")
    return walls


def collect(store: EventStore, task_ids: list[str], assembly, walls) -> dict:
    """Every decision's figures as the log recorded them, with its assembly and wall time next to them."""
    assembly_s = {(a.task_id, a.call_index): a.seconds for a in assembly}
    tasks = {}
    for task_id in task_ids:
        records = store.read_stream(task_id)
        calls = [r.event for r in records if isinstance(r.event, ModelCalled)]
        rows = [decision_row(c, assembly_s.get((task_id, c.call_index)), walls.get((task_id, c.call_index)))
                for c in calls]
        tasks[task_id] = {
            "rows": rows,
            "rejections": sum(1 for r in records if isinstance(r.event, ProposalRejected)),
            "phase": store.task(task_id).phase.value,
        }
    return {"tasks": tasks}


def decision_row(call: ModelCalled, assembly_s: float | None, wall_s: float | None) -> dict:
    return {
        "turn": call.call_index,
        "attempt": call.attempt,
        "prompt_tokens": call.prompt_tokens,
        "cached_tokens": call.cached_tokens,
        "evaluated_tokens": call.evaluated_tokens,
        "completion_tokens": call.completion_tokens,
        "ttft_s": call.ttft_s,
        "generation_s": call.generation_s,
        "model_s": call.ttft_s + call.generation_s,
        "assembly_s": assembly_s,
        "wall_s": wall_s,
        "prefix_break": call.prefix_break,
        "budget": call.manifest.budget,
    }


# -- the figures ------------------------------------------------------------------------------------


def summarize(tasks: dict) -> dict:
    """Totals over every task's decisions; ratios are of sums, so long turns weigh what they cost."""
    rows = [row for task in tasks.values() for row in task["rows"]]
    later = [row for row in rows if row["turn"] >= 2]
    last_turn = max(row["turn"] for row in rows)
    final_context = sum(task["rows"][-1]["prompt_tokens"] for task in tasks.values())
    evaluated = sum(row["evaluated_tokens"] for row in rows)
    model_s = [row["model_s"] for row in rows]
    assembly_s = [row["assembly_s"] for row in rows if row["assembly_s"] is not None]
    rest_s = [row["wall_s"] - row["model_s"] - row["assembly_s"] for row in rows
              if row["wall_s"] is not None and row["assembly_s"] is not None]
    return {
        "decisions": len(rows),
        "prompt_tokens": sum(row["prompt_tokens"] for row in rows),
        "evaluated_tokens": evaluated,
        "final_context_tokens": final_context,
        "largest_context_tokens": max(row["prompt_tokens"] for row in rows),
        "budget_tokens": rows[0]["budget"],
        "evaluated_over_final": evaluated / final_context,
        "reused_from_turn_2": share(sum(r["cached_tokens"] for r in later), sum(r["prompt_tokens"] for r in later)),
        "ttft_first_s": statistics.mean(r["ttft_s"] for r in rows if r["turn"] == 1),
        "ttft_last_s": statistics.mean(r["ttft_s"] for r in rows if r["turn"] == last_turn),
        "last_turn": last_turn,
        "model_s_total": sum(model_s),
        "model_s_mean": statistics.mean(model_s),
        "assembly_ms_mean": 1000 * statistics.mean(assembly_s),
        "assembly_ms_p95": 1000 * p95(assembly_s),
        "assembly_over_model": sum(assembly_s) / sum(model_s),
        "rest_ms_mean": 1000 * statistics.mean(rest_s) if rest_s else None,
        "prefix_breaks": sum(1 for r in rows if r["prefix_break"] is not None),
        "rejections": sum(task["rejections"] for task in tasks.values()),
        "phases": sorted({task["phase"] for task in tasks.values()}),
    }


def first_rounds(result: dict, turns: int) -> dict:
    """`result`'s totals over its first `turns` rounds only: to compare with a shorter case."""
    tasks = {
        task_id: {**task, "rows": [row for row in task["rows"] if row["turn"] <= turns]}
        for task_id, task in result["tasks"].items()
    }
    return summarize(tasks)


def share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


# -- printing ---------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def shown_turns(turns: int) -> list[int]:
    return sorted({1, 2, 3, turns, *range(10, turns + 1, 10)})


def turn_table(task: dict, turns: int) -> list[str]:
    lines = ["    turn   prompt   cached  evaluated  ttft s   gen s  assembly ms"]
    for row in task["rows"]:
        if row["turn"] in shown_turns(turns):
            lines.append(
                f"    {row['turn']:4d} {row['prompt_tokens']:8,d} {row['cached_tokens']:8,d} "
                f"{row['evaluated_tokens']:10,d} {row['ttft_s']:7.2f} {row['generation_s']:7.2f} "
                f"{1000 * (row['assembly_s'] or 0):12.1f}"
            )
    return lines


def totals_lines(s: dict, *, evaluated_target: float | None = None, reuse_target: float | None = None,
                 per_task: bool = False) -> list[str]:
    each = " (sums over all tasks)" if per_task else ""
    return [
        f"  prompt tokens, all turns{each}: {s['prompt_tokens']:,}",
        f"  tokens evaluated: {s['evaluated_tokens']:,} = {s['evaluated_over_final']:.3f} x the final context "
        f"({s['final_context_tokens']:,} tokens)" + target_note(s["evaluated_over_final"], "<=", evaluated_target),
        f"  prompt tokens reused from turn 2 on: {100 * s['reused_from_turn_2']:.1f} %"
        + target_note(s["reused_from_turn_2"], ">=", reuse_target),
        f"  time to first token: turn 1 {s['ttft_first_s']:.2f} s, turn {s['last_turn']} {s['ttft_last_s']:.2f} s"
        + (" (means over the tasks)" if per_task else ""),
        f"  model time {s['model_s_total']:.0f} s in {s['decisions']} decisions; largest context "
        f"{s['largest_context_tokens']:,} of a {s['budget_tokens']:,}-token budget",
        f"  checks: {s['prefix_breaks']} prefix breaks, {s['rejections']} rejected proposals, "
        f"tasks {', '.join(s['phases'])}",
    ]


def target_note(value: float, op: str, target: float | None) -> str:
    """The target after a figure, e.g. `target <= 1.15x: met` or `target >= 95 %: met`; nothing without one."""
    if target is None:
        return ""
    ok = value <= target if op == "<=" else value >= target
    shown = f"{target}x" if target > 1 else f"{100 * target:.0f} %"
    return f"   target {op} {shown}: {verdict(ok)}"


def assembly_lines(s: dict) -> list[str]:
    return [
        f"  assembly (request_for) per decision: mean {s['assembly_ms_mean']:.1f} ms, "
        f"p95 {s['assembly_ms_p95']:.1f} ms",
        f"  model call per decision:               mean {s['model_s_mean']:.2f} s",
        f"  assembly / model time: {100 * s['assembly_over_model']:.2f} %"
        + target_note(s["assembly_over_model"], "<=", TARGET_ASSEMBLY_SHARE),
        f"  rest of a decision (store appends, log reads, tool, thread hops): mean {s['rest_ms_mean']:.1f} ms",
    ]


def ratio_row(label: str, ours: float, theirs: float, fmt: str) -> str:
    times = f"{theirs / ours:8.1f}x" if ours else "       -"
    return f"    {label:32s} {format(ours, fmt):>12s} {format(theirs, fmt):>12s} {times}"


def comparison(title: str, ours_name: str, theirs_name: str, ours: dict, theirs: dict) -> list[str]:
    return [
        f"  {title}",
        f"    {'':32s} {ours_name:>12s} {theirs_name:>12s} {'ratio':>9s}",
        ratio_row("tokens evaluated", ours["evaluated_tokens"], theirs["evaluated_tokens"], ",d"),
        ratio_row("evaluated / final context", ours["evaluated_over_final"], theirs["evaluated_over_final"], ".2f"),
        f"    {'reused from turn 2 on':32s} {100 * ours['reused_from_turn_2']:11.1f}% "
        f"{100 * theirs['reused_from_turn_2']:11.1f}%",
        ratio_row("time to first token, turn 1 (s)", ours["ttft_first_s"], theirs["ttft_first_s"], ".2f"),
        ratio_row(f"time to first token, turn {ours['last_turn']} (s)",
                  ours["ttft_last_s"], theirs["ttft_last_s"], ".2f"),
        ratio_row("model time, all decisions (s)", ours["model_s_total"], theirs["model_s_total"], ".0f"),
    ]


def render(meta: dict, results: dict) -> str:
    one, mixed, no_lru, naive = (results[k] for k in ("one", "interleaved", "interleaved_no_lru", "naive"))
    turns = meta["turns"]
    out = [
        f"agentd agent loop: {meta['model']}, context {meta['n_ctx']} tokens, {meta['threads']} threads, "
        f"{meta['cpus']} CPUs",
        f"replies scripted (next_page calls); the model evaluates every prompt and generates up to "
        f"{meta['reply_tokens']} tokens per turn",
        "",
        f"1. one task, {turns} turns (KV LRU {meta['kv_cache_mib']} MiB)",
        *turn_table(next(iter(one["tasks"].values())), turns),
        *totals_lines(one["summary"], evaluated_target=TARGET_EVALUATED_OVER_FINAL, reuse_target=TARGET_REUSE_ONE),
        "",
        f"2. {INTERLEAVED_TASKS} tasks interleaved round-robin on one model, {turns} turns each "
        f"(KV LRU {meta['kv_cache_mib']} MiB)",
        *totals_lines(mixed["summary"], reuse_target=TARGET_REUSE_INTERLEAVED, per_task=True),
        *[f"    {task_id}: evaluated {task_s['evaluated_over_final']:.3f} x final context "
          f"({task_s['final_context_tokens']:,}), reused from turn 2 on {100 * task_s['reused_from_turn_2']:.1f} %"
          for task_id, task_s in per_task(mixed).items()],
        f"  KV LRU: {lru_line(mixed['kv_cache'])}",
        "",
        f"3. the same {INTERLEAVED_TASKS} tasks without the LRU (kv_cache_bytes=0), "
        f"{no_lru['case']['turns']} turns each",
        *totals_lines(no_lru["summary"], per_task=True),
        f"  KV LRU: {lru_line(no_lru['kv_cache'])}",
        *comparison(f"what the LRU buys, first {no_lru['case']['turns']} rounds of case 2 vs case 3:",
                    "LRU", "no LRU", first_rounds(mixed, no_lru["case"]["turns"]), no_lru["summary"]),
        "",
        f"4. naive loop: case 1 with the current time at the top of the system message, {turns} turns",
        *totals_lines(naive["summary"]),
        f"  prefix breaks: {naive['summary']['prefix_breaks']} recorded of {turns - 1} calls after the first "
        f"(first changed block: {first_break(naive)}), {naive['prefix_break_warnings']} warnings logged",
        *comparison("agentd (case 1) vs naive (case 4):", "agentd", "naive", one["summary"], naive["summary"]),
        "",
        "5. assembly vs model time per decision",
        f"  one task, {turns} turns:",
        *assembly_lines(one["summary"]),
        f"  {INTERLEAVED_TASKS} tasks interleaved: assembly mean {mixed['summary']['assembly_ms_mean']:.1f} ms, "
        f"p95 {mixed['summary']['assembly_ms_p95']:.1f} ms = {100 * mixed['summary']['assembly_over_model']:.2f} % "
        "of model time",
    ]
    return "\n".join(out)


def per_task(result: dict) -> dict:
    return {task_id: summarize({task_id: task}) for task_id, task in result["tasks"].items()}


def lru_line(kv: dict) -> str:
    return (f"{kv['hits']} hits, {kv['misses']} misses, {kv['evictions']} evictions, {kv['rejected']} rejected; "
            f"{kv['entries']} states held at the end, "
            f"{kv['bytes'] / 2**20:.0f} of {kv['capacity_bytes'] / 2**20:.0f} MiB")


def first_break(result: dict) -> str:
    breaks = {row["prefix_break"] for task in result["tasks"].values() for row in task["rows"] if row["prefix_break"]}
    return ", ".join(sorted(breaks)) or "none"


# -- the run ----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=DEFAULT_TURNS, help="decisions per task (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help=f"smoke run: --turns {QUICK_TURNS}")
    p.add_argument("--no-lru-turns", type=int, default=None,
                   help=f"rounds of case 3, which evaluates every prompt almost whole "
                        f"(default: {DEFAULT_NO_LRU_TURNS}, or --turns if fewer)")
    p.add_argument("--kv-cache-mib", type=int, default=DEFAULT_KV_CACHE_MIB,
                   help="the KV state LRU of cases 1, 2 and 4 (default: %(default)s)")
    p.add_argument("--model", default=None, help="a known model name or a GGUF file (default: qwen2.5-coder-0.5b)")
    p.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1),
                   help="llama.cpp threads (default: one per CPU, at most 4, as agentd's daemon)")
    p.add_argument("--json", default=str(HERE / "results" / "agent.json"), help="where to write the results")
    args = p.parse_args(argv)
    if args.quick:
        args.turns = QUICK_TURNS
    if args.turns < 2:
        p.error("--turns must be at least 2: reuse is measured from turn 2 on")
    args.no_lru_turns = min(args.turns, args.no_lru_turns or DEFAULT_NO_LRU_TURNS)
    args.model = resolve_model(args.model)
    return args


def cases(args: argparse.Namespace) -> list[Case]:
    lru = args.kv_cache_mib * 2**20
    return [
        Case("one", "case 1, one task", 1, args.turns, lru),
        Case("interleaved", f"case 2, {INTERLEAVED_TASKS} tasks interleaved", INTERLEAVED_TASKS, args.turns, lru),
        Case("interleaved_no_lru", f"case 3, {INTERLEAVED_TASKS} tasks without the LRU", INTERLEAVED_TASKS,
             args.no_lru_turns, 0),
        Case("naive", "case 4, naive loop", 1, args.turns, lru, naive=True),
    ]


def describe_run(args: argparse.Namespace, model_name: str, n_ctx: int) -> dict:
    return {
        "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "argv": sys.argv[1:],
        "turns": args.turns,
        "no_lru_turns": args.no_lru_turns,
        "kv_cache_mib": args.kv_cache_mib,
        "model": model_name,
        "n_ctx": n_ctx,
        "threads": args.threads,
        "reply_tokens": PAGES.max_output_tokens,
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "llama_cpp_python": version("llama_cpp_python"),
        "git_commit": git(["rev-parse", "HEAD"]),
        "runtime_uncommitted_changes": git(["status", "--porcelain", "--", ":/runtime"]),
    }






def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the figures."""
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = {case.key: run_case(case, args) for case in cases(args)}
    meta = describe_run(args, args.model.name, results["one"]["n_ctx"])
    print(render(meta, results))
    save(args.json, meta, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

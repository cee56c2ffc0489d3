"""The support example's answers with and without retrieval packing, side by side. Figures only.

Runs the cases of `examples/evals/support.yaml` (the support profile: its knowledge folder, its tools)
twice in one process on the same model:

    packed     agentd as shipped: the tenant's sections ranked by utility (relevance x authority x
               freshness - redundancy - injection risk) and packed within the evidence budget
    unpacked   the same loop with packing replaced by every section the tenant may read and has not
               been shown yet, in document order: no ranking, no budget, no floor (scope still first)

and prints, per arm, the successes and the median prompt tokens per model call, the unpacked arm's as
a ratio to the packed one's, and each case's successes in both. A model's judgement varies from run to
run: read the table, never assert on it.

    .venv/bin/python bench/support_bench.py [--runs 1] [--model qwen2.5-coder-0.5b]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CASES = REPO / "examples" / "evals" / "support.yaml"


def unpacked(sections, *, tenant, query, exclude, budget, limit, count, **_ignored):
    """Every section `tenant` may read and was not shown yet, in document order: what a runtime without
    packing puts in front of the model."""
    from runtime.knowledge import evidence

    chosen = [
        evidence.Scored(s, 1.0, count(s.text)) for s in sections if s.allowed_for(tenant) and s.cite not in exclude
    ]
    return evidence.Packed(tuple(chosen), (), budget, sum(c.tokens for c in chosen))


def run_arm(name: str, runs: int, model: str | None, data_dir: Path) -> dict:
    """One `agentd eval tasks` of the support cases in this process, as its JSON report."""
    from runtime.cli import cli
    from runtime.knowledge import evidence

    shipped = evidence.retrieve
    if name == "unpacked":
        evidence.retrieve = unpacked
    out = io.StringIO()
    try:
        args = ["--data-dir", str(data_dir), "eval", "tasks", str(CASES), "--runs", str(runs), "--json"]
        if model:
            args += ["--model", model]
        with contextlib.redirect_stdout(out):
            cli.main(args=args, prog_name="agentd", standalone_mode=False)
    finally:
        evidence.retrieve = shipped
    return json.loads(out.getvalue())


def figures(report: dict) -> dict:
    results = [r for case in report["cases"] for r in case["results"]]
    per_call = [r["prompt_tokens"] / r["calls"] for r in results if r.get("calls")]
    labels = [{f["label"] for f in r.get("failures", [])} for r in results]
    return {
        "runs": len(results),
        "successes": sum(bool(r["success"]) for r in results),
        # A case's `forbid` check fails a run that was shown a section it must not see; the other checks
        # are the answer's and the tools'. Both arms are read on both.
        "shown_forbidden": sum("leak" in found for found in labels),
        "right_but_for_what_it_was_shown": sum(bool(found) and found <= {"leak"} for found in labels),
        "median_prompt_tokens_per_call": round(statistics.median(per_call)) if per_call else None,
        "cases": {case["name"]: [bool(r["success"]) for r in case["results"]] for case in report["cases"]},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1, help="runs of each case per arm (default: %(default)s)")
    p.add_argument("--model", help="model name or GGUF file (default: the configured one)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    arms = {}
    with tempfile.TemporaryDirectory(prefix="support-bench-") as tmp:
        for name in ("packed", "unpacked"):
            print(f"running the {name} arm...", file=sys.stderr, flush=True)
            arms[name] = figures(run_arm(name, args.runs, args.model, Path(tmp) / name))
    base = arms["packed"]
    print(f"support example, {base['runs']} runs per arm")
    print(f"{'arm':<10} {'success':>9} {'shown a forbidden section':>26} {'of them, else right':>20} "
          f"{'prompt tokens/call':>19} {'ratio':>6}")
    for name, f in arms.items():
        ratio = f["median_prompt_tokens_per_call"] / base["median_prompt_tokens_per_call"]
        print(f"{name:<10} {f['successes']:>4}/{f['runs']:<4} {f['shown_forbidden']:>26} "
              f"{f['right_but_for_what_it_was_shown']:>20} {f['median_prompt_tokens_per_call']:>19,} {ratio:>5.2f}x")
    print("\nper case (packed / unpacked):")
    for case, packed_runs in base["cases"].items():
        other = arms["unpacked"]["cases"].get(case, [])
        print(f"  {case:<40} {sum(packed_runs)}/{len(packed_runs)}  {sum(other)}/{len(other)}")
    if args.json:
        args.json.write_text(json.dumps(arms, indent=2))


if __name__ == "__main__":
    main()

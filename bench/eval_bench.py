"""Task success of several models on the same cases, side by side: what `agentd eval tasks` measures, per model.

Runs `agentd eval tasks FILES --model M --runs N --json` once per model, in one invocation so that the
figures come from one machine state, and prints per model and case group: successes of runs with the
95 % Wilson interval, how failures ended, and the median tokens and seconds per successful task, with
the seconds as a ratio to the first model's (by default the smoke model, the baseline the issue asks
the default to be compared with). Figures only, no assertions: a model's judgement varies, and the
targets are read off the table.

    python bench/eval_bench.py                                  # both shipped case files, 3 runs, smoke + default
    python bench/eval_bench.py --runs 10 --model smollm2-135m --model qwen2.5-coder-0.5b --model qwen2.5-coder-1.5b
    python bench/eval_bench.py examples/evals/support.yaml --runs 10
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.provenance import git, save, version

REPO = Path(__file__).resolve().parent.parent
CASES = [REPO / "examples" / "evals" / "support.yaml", REPO / "examples" / "evals" / "workspace.yaml"]
MODELS = ["smollm2-135m", "qwen2.5-coder-0.5b"]


def evaluate(files: list[Path], model: str, runs: int, data_dir: Path) -> dict:
    """One `agentd eval tasks` run of every file, as its JSON report (one per file, merged by file)."""
    reports = {}
    for f in files:
        done = subprocess.run(
            [sys.executable, "-m", "runtime.cli", "--data-dir", str(data_dir), "eval", "tasks", str(f),
             "--model", model, "--runs", str(runs), "--json"],
            capture_output=True, text=True, cwd=REPO,
        )
        if done.returncode != 0:
            raise SystemExit(f"eval of {f.name} on {model} failed: {done.stderr.strip().splitlines()[-1:]}")
        reports[f.name] = json.loads(done.stdout)
    return reports


def rows(reports: dict) -> list[tuple[str, dict]]:
    """(label, totals) for each file's groups and the file as a whole."""
    out = []
    for name, r in reports.items():
        for group, totals in sorted(r["totals"]["groups"].items()):
            out.append((f"{name} {group}", totals))
        out.append((f"{name} all", r["totals"]["all"]))
    return out


def cell(t: dict) -> str:
    low, high = t["wilson_95"]
    return f"{t['successes']}/{t['runs']} ({low:.0%}-{high:.0%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=CASES)
    parser.add_argument(
        "--model", action="append", dest="models", help="a known model name or a GGUF path (repeatable)"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "eval.json")
    args = parser.parse_args()
    models = args.models or MODELS

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="agentd-eval-bench-") as scratch:
        for model in models:
            started = time.perf_counter()
            print(f"evaluating {model} ({args.runs} runs of each case) ...", flush=True)
            results[model] = {"reports": evaluate(args.files, model, args.runs, Path(scratch) / model)}
            results[model]["wall_s"] = round(time.perf_counter() - started, 1)

    base = models[0]
    base_rows = dict(rows(results[base]["reports"]))
    print(f"\n{'GROUP':34}" + "".join(f"{m:>30}" for m in models))
    for label, _ in rows(results[base]["reports"]):
        line = f"{label:34}"
        for m in models:
            t = dict(rows(results[m]["reports"])).get(label)
            line += f"{cell(t) if t else '-':>30}"
        print(line)
    print(f"\n{'median per successful task':34}" + "".join(f"{m:>30}" for m in models))
    for label, _ in rows(results[base]["reports"]):
        if not label.endswith(" all"):
            continue
        line = f"{label:34}"
        for m in models:
            t = dict(rows(results[m]["reports"]))[label]
            if t["median_seconds"] is None:
                line += f"{'no success':>30}"
                continue
            b = base_rows[label]["median_seconds"]
            ratio = f" = {t['median_seconds'] / b:.1f}x" if b else ""
            line += f"{t['median_seconds']:>8.1f} s{ratio:8} {t['median_prompt_tokens'] or 0:>6} tok"
        print(line)
    print("\nfailure endings (all runs):")
    for m in models:
        endings: dict[str, int] = {}
        for r in results[m]["reports"].values():
            for k, v in r["totals"]["all"]["failures"].items():
                endings[k] = endings.get(k, 0) + v
        print(f"  {m}: " + (", ".join(f"{k} {v}" for k, v in sorted(endings.items(), key=lambda kv: -kv[1])) or "none"))
    meta = {"runs": args.runs, "models": models, "files": [str(f) for f in args.files],
            "commit": git(["rev-parse", "HEAD"]), "llama_cpp_python": version("llama-cpp-python")}
    save(args.out, meta, results)


if __name__ == "__main__":
    main()

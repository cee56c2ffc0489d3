"""The eval report: per case and in total, successes with a Wilson interval, false claims, lost lines,
failure endings, costs.

Pure functions from run results to a report dict, and from that dict to the table; the JSON written
to the reports folder is the same dict. Medians of tokens and seconds count successful runs only: a
run that failed fast is cheap and says nothing about what a finished task costs. Beside success, two
failures are counted apart because they are the ones a user does not see: a run that ended
`completed` with an answer although a check failed (it said it was done), and a run that lost a line
a file had to keep.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

from runtime.eval.check import LOST_LINES
from runtime.output import table

# 2: `false_claims` and `lost_lines` in each summary, `false_claim` and `lost_lines` in each run.
FORMAT = 2
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class RunResult:
    """One run of one case, as the report needs it."""

    case: str
    group: str | None
    run: int
    success: bool
    label: str | None
    detail: str
    failures: tuple[dict[str, str], ...]
    ending: str
    answer: str | None
    sources: tuple[str, ...]
    steps: int
    calls: int
    prompt_tokens: int
    evaluated_tokens: int
    completion_tokens: int
    seconds: float
    task_id: str | None = None
    file: str = ""
    # After the run: whether `task undo` put the workspace back byte for byte ("restored"), or why not;
    # None when the task changed no file.
    undo: str | None = None

    @property
    def false_claim(self) -> bool:
        """Ended `completed` with an answer, yet a check failed: the user was told, and not told true
        (seed 003's "confidently wrong", counted for tasks). An honest "I could not" that fails a check
        counts too: the check, not the wording, says the work is not done."""
        return not self.success and self.ending == "completed" and self.answer is not None

    @property
    def lost_lines(self) -> bool:
        """A line a file had before the run, which the case says the request did not touch, is gone."""
        return any(f.get("label") == LOST_LINES for f in self.failures)


def wilson(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for a success rate: sound at 0 of N and N of N, unlike p ± z·se."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def summary(runs: Sequence[RunResult]) -> dict[str, Any]:
    """Successes, interval, failure endings and the medians of the successful runs."""
    ok = [r for r in runs if r.success]
    lo, hi = wilson(len(ok), len(runs))
    return {
        "runs": len(runs),
        "successes": len(ok),
        "rate": round(len(ok) / len(runs), 4) if runs else None,
        "wilson_95": [round(lo, 4), round(hi, 4)],
        "false_claims": sum(r.false_claim for r in runs),
        "lost_lines": sum(r.lost_lines for r in runs),
        "undone": sum(r.undo == "restored" for r in runs),
        "undo_failed": sum(r.undo is not None and r.undo != "restored" for r in runs),
        "failures": dict(sorted(Counter(r.label for r in runs if not r.success).items())),
        "median_prompt_tokens": _median(r.prompt_tokens for r in ok),
        "median_evaluated_tokens": _median(r.evaluated_tokens for r in ok),
        "median_seconds": _median((r.seconds for r in ok), digits=2),
    }


def build(
    results: Sequence[RunResult],
    *,
    model: dict[str, Any],
    files: Sequence[str],
    runs_per_case: int,
    started_at: datetime,
    finished_at: datetime,
) -> dict[str, Any]:
    by_case: dict[str, list[RunResult]] = {}
    for r in results:
        by_case.setdefault(r.case, []).append(r)
    cases = []
    for name, runs in by_case.items():
        cases.append({
            "name": name,
            "file": runs[0].file,
            "group": runs[0].group,
            **summary(runs),
            "results": [_run(r) for r in runs],
        })
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        if r.group:
            groups.setdefault(r.group, []).append(r)
    return {
        "format": FORMAT,
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": finished_at.isoformat(timespec="seconds"),
        "model": model,
        "files": list(files),
        "runs_per_case": runs_per_case,
        "cases": cases,
        "totals": {
            "all": summary(results),
            "groups": {g: summary(runs) for g, runs in sorted(groups.items())},
        },
    }


def render(report: dict[str, Any]) -> str:
    """The report as a table for people: one row per case, then the totals."""
    headers = [
        "CASE", "OK", "95% CI", "FALSE CLAIM", "LOST LINES", "UNDONE", "FAILURES", "PROMPT TOK", "EVAL TOK", "SECONDS",
    ]
    rows = [_row(c["name"], c) for c in report["cases"]]
    totals = report["totals"]
    footer = [_row(f"group {g}", s) for g, s in totals["groups"].items()]
    footer.append(_row("all cases", totals["all"]))
    lines = table([*rows, *footer], headers).splitlines()
    # A rule between the cases and the totals; the table helper knows rows, not sections.
    width = max(len(line) for line in lines)
    lines.insert(1 + len(rows), "-" * width)
    model = report["model"].get("name", "?")
    head = f"{len(report['cases'])} cases x {report['runs_per_case']} runs on {model}"
    notes = [
        "false claim: runs that ended completed with an answer, yet failed a check",
        "lost lines: runs after which a file lacks a line it had to keep",
        "undone: runs whose changes agentd task undo put back byte for byte, of those that changed files",
        "tokens and seconds: medians of the successful runs (prompt tokens billed, and evaluated)",
    ]
    return "\n".join([head, "", *lines, "", *notes])


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, ensure_ascii=False, indent=2) + "\n"


def file_name(model_name: str, when: datetime) -> str:
    """`20261201T101500Z-qwen2.5-coder-0.5b-instruct-q4_k_m.json`: sorts by time, says the model."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", model_name.removesuffix(".gguf")).strip("-").lower() or "model"
    return f"{when.strftime('%Y%m%dT%H%M%SZ')}-{safe}.json"


def _row(name: str, s: dict[str, Any]) -> list[Any]:
    lo, hi = s["wilson_95"]
    failures = ", ".join(f"{label} {n}" for label, n in s["failures"].items()) or "-"
    return [
        name,
        f"{s['successes']}/{s['runs']}",
        f"{lo * 100:.0f}-{hi * 100:.0f}%",
        s["false_claims"],
        s["lost_lines"],
        f"{s['undone']}/{s['undone'] + s['undo_failed']}",
        failures,
        s["median_prompt_tokens"],
        s["median_evaluated_tokens"],
        s["median_seconds"],
    ]


def _run(r: RunResult) -> dict[str, Any]:
    return {
        "run": r.run,
        "success": r.success,
        "false_claim": r.false_claim,
        "lost_lines": r.lost_lines,
        "undo": r.undo,
        "label": r.label,
        "detail": r.detail,
        "failures": list(r.failures),
        "ending": r.ending,
        "answer": r.answer,
        "sources": list(r.sources),
        "steps": r.steps,
        "calls": r.calls,
        "prompt_tokens": r.prompt_tokens,
        "evaluated_tokens": r.evaluated_tokens,
        "completion_tokens": r.completion_tokens,
        "seconds": round(r.seconds, 2),
        "task_id": r.task_id,
    }


def _median(values: Iterable[float], digits: int = 0) -> float | int | None:
    values = list(values)
    if not values:
        return None
    m = statistics.median(values)
    return round(m, digits) if digits else int(round(m))

"""Success per task family from `agentd eval tasks` reports, as one Markdown table; optionally two sets of
reports side by side (before and after a change), run on the same cases.

A generated suite (`agentd eval generate`) is run file by file, so its result is several reports: this
merges them by case. Prints, per family: successes of runs, the runs that ended completed with an
answer yet failed a check (confidently wrong), among them those that changed no file although a file was
to change (completed, nothing changed: issue 25's "claims a change that did not happen"), the runs that
lost lines, and the median seconds of a successful run; then the totals. Figures only.

    python bench/family_table.py reports/*/*.json
    python bench/family_table.py --before before/*.json --after after/*.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any


def runs_by_case(paths: list[Path]) -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """case name -> (its group, its runs), over every report given."""
    out: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for path in paths:
        report = json.loads(path.read_text())
        for case in report["cases"]:
            out.setdefault(case["name"], (case.get("group") or "-", []))[1].extend(case["results"])
    return out


def completed_unchanged(run: dict[str, Any]) -> bool:
    """Ended completed with an answer, a file check failed, and the task changed no file (`undo` is None
    only when there was nothing to undo)."""
    return (bool(run.get("false_claim")) and run.get("undo") is None
            and any(f.get("label") == "file_check" for f in run.get("failures", ())))


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r["success"]]
    seconds = [r["seconds"] for r in ok if r.get("seconds") is not None]
    return {
        "runs": len(runs),
        "ok": len(ok),
        "wrong": sum(bool(r.get("false_claim")) for r in runs),
        "unchanged": sum(completed_unchanged(r) for r in runs),
        "lost": sum(bool(r.get("lost_lines")) for r in runs),
        "seconds": round(statistics.median(seconds), 1) if seconds else None,
    }


def families(cases: dict[str, tuple[str, list[dict[str, Any]]]], only: set[str] | None = None) -> dict[str, dict]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name, (group, runs) in cases.items():
        if only is None or name in only:
            grouped[group].extend(runs)
    table = {g: summary(r) for g, r in sorted(grouped.items())}
    table["all"] = summary([r for runs in grouped.values() for r in runs])
    return table


def _cell(s: dict[str, Any] | None) -> str:
    if s is None or not s["runs"]:
        return "-"
    pct = round(100 * s["ok"] / s["runs"])
    return f"{s['ok']}/{s['runs']} ({pct} %)"


def render(columns: list[tuple[str, dict[str, dict]]]) -> str:
    names = list(dict.fromkeys(g for _, t in columns for g in t if g != "all")) + ["all"]
    head = ["family"]
    for label, _ in columns:
        head += [f"{label}: success", "confidently wrong", "of them nothing changed", "lost lines",
                 "median s (success)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in names:
        row = [f"**{g}**" if g == "all" else g]
        for _, table in columns:
            s = table.get(g)
            row += [_cell(s)] + [str(s[k]) if s else "-" for k in ("wrong", "unchanged", "lost")] + [
                str(s["seconds"]) if s and s["seconds"] is not None else "-"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--before", nargs="*", type=Path, default=[])
    parser.add_argument("--after", nargs="*", type=Path, default=[])
    parser.add_argument("--labels", nargs=2, default=["before", "after"])
    args = parser.parse_args()
    if args.reports and (args.before or args.after):
        parser.error("give reports, or --before and --after, not both")
    if args.reports:
        print(render([("run", families(runs_by_case(args.reports)))]))
        return
    before, after = runs_by_case(args.before), runs_by_case(args.after)
    # Side by side only over the cases both sides ran.
    both = set(before) & set(after)
    print(render([(args.labels[0], families(before, both)), (args.labels[1], families(after, both))]))


if __name__ == "__main__":
    main()

"""Two `agentd eval tasks --json` reports side by side: the same cases before and after a change.

Prints a Markdown table per case (successes, and the runs that claimed success and failed, lost lines,
or were not put back whole by undo) and the totals, with each side's failure labels, so that a note
can carry both tables as they came out. Figures only: which side is better is read off the table.

    python bench/eval_compare.py before.json after.json
    python bench/eval_compare.py before.json after.json --labels "5b86e65" "17c7ccb"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def load(path: Path) -> dict[str, Any]:
    """A report (a JSON object); a file of several (one per line or concatenated) is merged by case."""
    text = path.read_text()
    decoder = json.JSONDecoder()
    reports, at = [], 0
    while at < len(text):
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        report, at = decoder.raw_decode(text, at)
        reports.append(report)
    cases = [_counted(c) for r in reports for c in r["cases"]]
    return {"model": reports[0]["model"], "cases": cases}


def _counted(case: dict[str, Any]) -> dict[str, Any]:
    """A case with its false claims counted from its runs where a report from before they were counted
    lacks them; lost lines and undo cannot be counted after the fact, and stay unknown (None)."""
    if "false_claims" in case:
        return case
    runs = case.get("results", [])
    claimed = sum(1 for r in runs if not r["success"] and r["ending"] == "completed" and r["answer"] is not None)
    return {**case, "false_claims": claimed, "lost_lines": None, "undone": None, "undo_failed": None}


def cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "-"
    extra = []
    if c.get("false_claims"):
        extra.append(f"{c['false_claims']} false claim")
    if c.get("lost_lines"):
        extra.append(f"{c['lost_lines']} lost lines")
    if c.get("undo_failed"):
        extra.append(f"{c['undo_failed']} undo failed")
    labels = ", ".join(f"{k} {v}" for k, v in (c.get("failures") or {}).items())
    text = f"{c['successes']}/{c['runs']}"
    if labels:
        text += f" ({labels})"
    return text + (f"; {'; '.join(extra)}" if extra else "")


def totals(cases: list[dict[str, Any]]) -> dict[str, int | None]:
    keys = ("runs", "successes", "false_claims", "lost_lines", "undone", "undo_failed")
    return {k: None if any(c.get(k) is None for c in cases) else sum(int(c[k]) for c in cases) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--labels", nargs=2, default=("before", "after"))
    args = parser.parse_args()
    before, after = load(args.before), load(args.after)
    by_name = [{c["name"]: c for c in r["cases"]} for r in (before, after)]
    names = list(dict.fromkeys([*by_name[0], *by_name[1]]))
    a, b = args.labels
    print(f"| case | {a} | {b} |")
    print("|---|---|---|")
    for name in names:
        print(f"| {name} | {cell(by_name[0].get(name))} | {cell(by_name[1].get(name))} |")
    print()
    print(f"| totals | {a} | {b} |")
    print("|---|---|---|")
    t = [totals(before["cases"]), totals(after["cases"])]
    rows = [
        ("successes", lambda x: f"{x['successes']}/{x['runs']} ({100 * x['successes'] / max(x['runs'], 1):.0f} %)"),
        ("claimed success and failed", lambda x: str(x["false_claims"])),
        ("lost lines", lambda x: "not counted" if x["lost_lines"] is None else str(x["lost_lines"])),
        ("undo put back whole / runs that changed files",
         lambda x: "no undo" if x["undone"] is None else f"{x['undone']}/{x['undone'] + x['undo_failed']}"),
    ]
    for label, show in rows:
        print(f"| {label} | {show(t[0])} | {show(t[1])} |")


if __name__ == "__main__":
    main()

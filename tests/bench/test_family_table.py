"""bench/family_table.py: a generated suite's reports, merged by case, give success per family."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO


def report(path: Path, cases: list[tuple[str, str, list[tuple[bool, bool, bool, float]]]]) -> Path:
    path.write_text(json.dumps({"cases": [
        {"name": name, "group": group, "results": [
            {"success": ok, "false_claim": wrong, "lost_lines": lost, "seconds": s} for ok, wrong, lost, s in runs
        ]} for name, group, runs in cases
    ]}))
    return path


def table(*args: str) -> str:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "family_table.py"), *args],
                          capture_output=True, text=True, check=True)
    return done.stdout


def test_reports_of_several_files_are_one_table_per_family(tmp_path: Path) -> None:
    a = report(tmp_path / "a.json", [("p1-count", "count", [(True, False, False, 10.0)]),
                                     ("p1-append", "append", [(False, True, True, 30.0)])])
    b = report(tmp_path / "b.json", [("p2-count", "count", [(False, True, False, 5.0)]),
                                     ("p2-append", "append", [(True, False, False, 20.0)])])
    rows = {line.split(" | ")[0].strip("| *"): line.rstrip(" |") for line in table(str(a), str(b)).splitlines()[2:]}
    assert rows["count"].split(" | ")[1:6] == ["1/2 (50 %)", "1", "0", "0", "10.0"]
    assert rows["append"].split(" | ")[1:6] == ["1/2 (50 %)", "1", "0", "1", "20.0"]
    assert rows["all"].split(" | ")[1:5] == ["2/4 (50 %)", "2", "0", "1"]


def test_before_and_after_are_compared_over_the_cases_both_ran(tmp_path: Path) -> None:
    before = report(tmp_path / "before.json", [("x", "count", [(False, True, False, 9.0)]),
                                               ("y", "count", [(False, False, False, 9.0)])])
    after = report(tmp_path / "after.json", [("x", "count", [(True, False, False, 7.0)])])
    out = table("--before", str(before), "--after", str(after))
    count = next(line for line in out.splitlines() if line.startswith("| count"))
    assert count.split(" | ")[1] == "0/1 (0 %)" and count.split(" | ")[6] == "1/1 (100 %)"


def test_a_completed_run_that_changed_no_file_it_had_to_is_counted_apart(tmp_path: Path) -> None:
    def run(undo: str | None, label: str) -> dict:
        return {"success": False, "false_claim": True, "lost_lines": False, "seconds": 9.0, "undo": undo,
                "failures": [{"label": label}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"cases": [
        {"name": "a", "group": "append", "results": [run(None, "file_check")]},     # said done, did nothing
        {"name": "b", "group": "append", "results": [run("restored", "file_check")]},  # changed, wrongly
        {"name": "c", "group": "count", "results": [run(None, "wrong_answer")]},    # a question, no file to change
    ]}))
    rows = {line.split(" | ")[0].strip("| *"): line.split(" | ") for line in table(str(path)).splitlines()[2:]}
    assert rows["append"][2:4] == ["2", "1"]
    assert rows["count"][2:4] == ["1", "0"]

"""`agentd eval generate`: a seed gives the same suite everywhere, each family gets its share, the files
say what the facts say, and every case's checks pass the correct result and fail doing nothing. No
model runs here: a run is written as the events a run that did the work records."""

from __future__ import annotations

import ast
import configparser
import csv
import io
import json
import re
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest
import yaml

from runtime.eval import check
from runtime.eval.case import load
from runtime.eval.family import FAMILIES, Made
from runtime.eval.run import files_after, preflight
from runtime.eval.suite import generate, write
from tests.helpers import lay_out_case, one_error_line, recorded_run

SEEDS = (0, 7, 2026)


def suite_cases(tmp_path: Path, seed: int, count: int) -> list[tuple[Made, object]]:
    """Each generated case as made (with its correct result) and as the eval loads it from the file."""
    paths = write(tmp_path / f"suite-{seed}", seed, count)
    loaded = {c.name: c for c in load(paths)}
    return [(m, loaded[m.case["name"]]) for f in generate(seed, count) for m in f.made]


def test_a_seed_gives_the_same_files_byte_for_byte_and_another_seed_other_ones(tmp_path: Path) -> None:
    first = write(tmp_path / "a", 5, 40)
    again = write(tmp_path / "b", 5, 40)
    other = write(tmp_path / "c", 6, 40)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]
    assert [p.read_bytes() for p in first] != [p.read_bytes() for p in other]


def test_every_family_gets_the_same_share_and_a_hundred_and_fifty_cases_are_ten_each() -> None:
    made = [m for f in generate(3, 150) for m in f.made]
    assert len(made) == 150
    assert Counter(m.case["group"] for m in made) == {name: 10 for name in FAMILIES}
    assert len({m.case["name"] for m in made}) == 150
    assert len(FAMILIES) >= 15
    # Several wordings per family: the suite does not ask one sentence ten times.
    for family in FAMILIES:
        inputs = {re.sub(r"\S*[\d/.]\S*", "", m.case["input"]) for m in made if m.case["group"] == family}
        assert len(inputs) >= 2, family


def test_projects_differ_in_names_formats_and_layout() -> None:
    projects = [f.project for f in generate(11, 150)]
    assert len({p.name for p in projects}) >= 4
    assert len({p.settings_format for p in projects}) >= 3
    assert len({p.table_path for p in projects}) >= 3
    assert len({p.theme.table for p in projects}) >= 3


@pytest.mark.parametrize("seed", SEEDS)
def test_the_files_say_what_the_facts_say(seed: int, tmp_path: Path) -> None:
    """The truth of every case is computed from the facts; here the facts are read back from the files
    with the formats' own parsers, and the script is run."""
    for f in generate(seed, 30):
        p, files = f.project, f.project.files
        rows = list(csv.DictReader(io.StringIO(files[p.table_path])))
        assert [int(r["id"]) for r in rows] == [r.id for r in p.rows]
        assert [r[p.theme.entity] for r in rows] == [r.entity for r in p.rows]
        assert [float(r[p.theme.measure]) for r in rows] == [float(r.measure) for r in p.rows]
        assert len({r.entity for r in p.rows}) == len(p.rows), "max and min name one row"
        text = files[p.settings_path]
        if p.settings_format == "ini":
            ini = configparser.ConfigParser()
            ini.read_string(text)
            assert dict(ini["server"]) == {k: str(v).lower() for k, v in p.settings.items()}
        else:
            parse = {"json": json.loads, "yaml": yaml.safe_load, "toml": lambda t: tomllib.loads(t)["server"]}
            assert parse[p.settings_format](text) == p.settings
        assert tomllib.loads(files["pyproject.toml"])["project"]["version"] == p.version
        assert json.loads(files[p.json_path]) == list(p.team)
        log = files[p.log_path]
        for level in ("ERROR", "WARNING"):
            assert len(re.findall(rf"^\S+ \S+ {level} ", log, re.MULTILINE)) == p.levels(level)
        tree = ast.parse(files[p.module_path])
        assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef)] == [fn.name for fn in p.functions]
        todo = [line[2:] for line in files[p.todo_path].splitlines() if line.startswith("- ")]
        assert todo == list(p.todo)
        assert [path for path, t in files.items() if p.vendor in t] == [p.vendor_path]
        script = tmp_path / "script.py"
        script.write_text(files[p.script_path])
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
        assert out.strip() == p.script_output


@pytest.mark.parametrize("seed", SEEDS)
def test_the_correct_result_of_every_case_passes_its_checks(seed: int, tmp_path: Path) -> None:
    for i, (made, case) in enumerate(suite_cases(tmp_path, seed, 45)):
        preflight(case)
        scratch = tmp_path / f"run-{i}"
        workspace = lay_out_case(case, scratch)
        for name, text in made.changes.items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text, encoding="utf-8")
        verdict = check.judge(case, recorded_run(case, made.answer), files=files_after(case, scratch, workspace))
        assert verdict.success, (case.name, case.input, verdict.failures)


@pytest.mark.parametrize("seed", SEEDS)
def test_doing_nothing_or_answering_wrong_fails_every_case_that_asks_for_something(seed: int, tmp_path: Path) -> None:
    for i, (made, case) in enumerate(suite_cases(tmp_path, seed, 45)):
        scratch = tmp_path / f"run-{i}"
        workspace = lay_out_case(case, scratch)
        verdict = check.judge(case, recorded_run(case, "I could not find that."),
                              files=files_after(case, scratch, workspace))
        asks = bool(made.changes or case.expect.answer_contains)
        assert verdict.success is not asks, (case.name, case.input, verdict.failures)


def test_a_change_that_drops_a_line_it_had_to_keep_is_a_lost_line(tmp_path: Path) -> None:
    for i, (made, case) in enumerate(suite_cases(tmp_path, 1, 150)):
        if case.group not in ("append", "replace_value", "rename", "fix_typo"):
            continue
        (path, text), = made.changes.items()
        before = case.files[path].splitlines()
        kept = [line for line in before if line.strip() and not any(e.lower() in line.lower()
                                                                   for e in case.keeps[path].except_)]
        dropped = text.replace(kept[0] + "\n", "", 1)
        scratch = tmp_path / f"run-{i}"
        workspace = lay_out_case(case, scratch)
        (workspace / path).write_text(dropped, encoding="utf-8")
        verdict = check.judge(case, recorded_run(case, made.answer), files=files_after(case, scratch, workspace))
        assert verdict.label == check.LOST_LINES, (case.name, verdict.failures)


def test_a_planted_instruction_obeyed_fails_the_case(tmp_path: Path) -> None:
    planted = [(m, c) for m, c in suite_cases(tmp_path, 4, 150) if c.group == "planted_instruction"]
    assert planted
    kinds = set()
    for i, (made, case) in enumerate(planted):
        scratch = tmp_path / f"run-{i}"
        workspace = lay_out_case(case, scratch)
        marker = case.expect.answer_not_contains[0]
        note = next(text for name, text in case.files.items() if marker in text or "pwned" in text)
        instruction = note.strip().splitlines()[-1]
        answer = made.answer
        if "pwned.txt" in instruction:
            kinds.add("file")
            (workspace / "pwned.txt").write_text("done\n")
        elif "todo list" in instruction:
            kinds.add("todo")
            todo = next(name for name in case.files if "todo" in name.lower())
            (workspace / todo).write_text(f"{marker}\n")
        else:
            kinds.add("answer")
            answer = marker
        verdict = check.judge(case, recorded_run(case, answer), files=files_after(case, scratch, workspace))
        assert not verdict.success, (case.name, instruction)
    assert kinds == {"file", "todo", "answer"}


def test_generate_writes_the_files_that_eval_tasks_reads(agentd, tmp_path: Path) -> None:
    out = tmp_path / "suite"
    result = agentd("eval", "generate", "--seed", "9", "--count", "20", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "20 cases over 2 projects" in result.stdout
    assert len(load(sorted(out.glob("*.yaml")))) == 20


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--seed", "1", "--count", "0"], "--count"),
        (["--seed", "-3"], "--seed"),
        (["--count", "5"], "--seed"),
        (["--seed", "x"], "--seed"),
    ],
)
def test_bad_options_are_one_line_and_exit_2_and_write_nothing(agentd, args: list[str], needle: str,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "suite"
    one_error_line(agentd("eval", "generate", *args, "-o", str(out)), needle, code=2)
    assert not out.exists()


def test_a_folder_that_holds_files_or_is_a_file_is_refused_and_left_as_it_was(agentd, tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.yaml").write_text("precious\n")
    one_error_line(agentd("eval", "generate", "--seed", "1", "-o", str(full)), "not empty", code=2)
    assert [p.name for p in full.iterdir()] == ["mine.yaml"] and (full / "mine.yaml").read_text() == "precious\n"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    one_error_line(agentd("eval", "generate", "--seed", "1", "-o", str(a_file)), "not a folder", code=2)
    assert a_file.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "full"], "no staging folder left behind"

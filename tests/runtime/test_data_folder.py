"""The data folder: found upward from the current folder as git finds .git, made only by a command that
writes, and every way of naming it that cannot work said in one line.

Every case runs the real `agentd` command in a subprocess, in real folders under tmp_path.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runtime.config import load_settings

# Commands that only look at the data folder. Each is given whatever it needs to get as far as the store.
READING = [
    ["task", "list"],
    ["task", "show", "t-0123456789"],
    ["events", "list"],
    ["events", "tail"],
    ["events", "export"],
    ["replay"],
    ["db", "check"],
    ["status"],
    ["approvals", "list"],
    ["notifications", "list"],
    ["schedule", "list"],
]
# Commands that change something already there: with nothing there, there is nothing to change.
CHANGING = [
    ["task", "cancel", "t-0123456789"],
    ["task", "say", "t-0123456789", "hello"],
    ["approvals", "approve", "ap-01234567"],
    ["notifications", "send", "t-0123456789", "hello"],
    ["schedule", "remove", "s-01234567"],
]


def one_error_line(result: subprocess.CompletedProcess, code: int, *names: object) -> str:
    shown = f"exit {result.returncode}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.returncode == code, shown
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentd: "), shown
    for name in names:
        assert str(name) in lines[0], f"the error line does not name {name!r}\n{shown}"
    return lines[0]


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    return result.stdout


def everything_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


def submit(agentd, goal: str, *extra: str) -> str:
    return ok(agentd("task", "submit", goal, *extra)).strip()


# -- a command that only reads creates nothing -----------------------------------------------------


@pytest.mark.parametrize("args", READING + CHANGING, ids=lambda args: " ".join(args))
def test_a_command_with_no_data_folder_says_where_it_looked_and_creates_nothing(
    agentd, isolated: Path, args: list[str]
) -> None:
    result = agentd(*args, timeout=30)

    line = one_error_line(result, 1, isolated)
    assert "no data folder" in line
    assert everything_under(isolated) == []


@pytest.mark.parametrize("args", READING, ids=lambda args: " ".join(args))
def test_a_command_that_only_reads_creates_no_database_in_an_empty_data_folder(
    agentd, isolated: Path, args: list[str]
) -> None:
    (isolated / ".agentd").mkdir()

    result = agentd(*args, timeout=30)

    one_error_line(result, 1, isolated / ".agentd")
    # The folder is there, so the command's log may go into it; nothing else may.
    assert [p.name for p in everything_under(isolated / ".agentd") if "logs" not in p.parts] == []


@pytest.mark.parametrize("args", [["model", "list"], ["skills", "list"]], ids=lambda args: " ".join(args))
def test_a_command_that_needs_no_data_folder_works_without_one_and_creates_none(
    agentd, isolated: Path, args: list[str]
) -> None:
    ok(agentd(*args))
    assert everything_under(isolated) == []


def test_a_data_folder_named_by_environment_that_does_not_exist_is_not_created_to_be_read(
    agentd, isolated: Path
) -> None:
    result = agentd("task", "list", env={"AGENTD_DATA_DIR": str(isolated / "state")})

    one_error_line(result, 1, isolated / "state", "AGENTD_DATA_DIR")
    assert everything_under(isolated) == []


def test_a_sqlite_database_named_by_url_is_not_created_to_be_read(agentd, isolated: Path) -> None:
    url = f"sqlite:///{isolated / 'db' / 'agentd.db'}"
    (isolated / "db").mkdir()

    result = agentd("task", "list", env={"AGENTD_DATABASE_URL": url})

    one_error_line(result, 1, isolated / "db" / "agentd.db", "AGENTD_DATABASE_URL")
    assert list((isolated / "db").iterdir()) == []
    ok(agentd("task", "submit", "write the release notes", env={"AGENTD_DATABASE_URL": url}))
    assert "write the release notes" in ok(agentd("task", "list", env={"AGENTD_DATABASE_URL": url}))


def test_the_commands_that_start_something_still_make_the_data_folder(agentd, isolated: Path) -> None:
    task_id = submit(agentd, "write the release notes")
    assert (isolated / ".agentd" / "agentd.db").is_file()
    assert task_id in ok(agentd("task", "list"))

    elsewhere = isolated / "elsewhere"
    elsewhere.mkdir()
    ok(agentd("--data-dir", str(elsewhere / "state"), "db", "upgrade"))
    assert (elsewhere / "state" / "agentd.db").is_file()


# -- found upward, as git finds .git -----------------------------------------------------------------


def test_a_command_in_a_subfolder_uses_the_data_folder_above_and_says_which(
    agentd, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_id = submit(agentd, "write the release notes")
    deep = isolated / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)

    listed = agentd("task", "list")

    assert task_id in ok(listed)
    assert str(isolated / ".agentd") in listed.stderr and len(listed.stderr.splitlines()) == 1
    status = json.loads(ok(agentd("status", "--json")))
    assert status["data_dir"] == str(isolated / ".agentd")
    assert not (isolated / "src" / ".agentd").exists() and not (deep / ".agentd").exists()


def test_a_task_submitted_in_a_subfolder_joins_the_data_folder_above_with_the_subfolder_as_its_workspace(
    agentd, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (isolated / ".agentd").mkdir()
    src = isolated / "src"
    src.mkdir()
    monkeypatch.chdir(src)

    task_id = submit(agentd, "tidy the module")

    assert not (src / ".agentd").exists()
    monkeypatch.chdir(isolated)
    shown = json.loads(ok(agentd("task", "show", task_id, "--json")))
    assert shown["summary"]["workspace"] == str(src)


def test_the_data_folder_in_the_current_folder_is_used_without_a_word(agentd, isolated: Path) -> None:
    submit(agentd, "write the release notes")
    listed = agentd("task", "list")
    assert ok(listed) and listed.stderr == ""


def test_a_data_folder_named_by_setting_is_used_as_named_not_searched_for(
    agentd, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit(agentd, "write the release notes")
    src = isolated / "src"
    src.mkdir()
    monkeypatch.chdir(src)
    (src / "agentd.toml").write_text('data_dir = ".agentd"\n')

    result = agentd("task", "list")

    one_error_line(result, 1, src / ".agentd", "agentd.toml")
    assert everything_under(src) == [src / "agentd.toml"]


def test_a_data_folder_found_above_is_the_one_a_started_daemon_is_told(isolated: Path, monkeypatch) -> None:
    """`agentd start` hands its serve the root options; a found folder goes with them, so both use one."""
    from runtime.cli._app import App

    (isolated / ".agentd").mkdir()
    (isolated / "src").mkdir()
    monkeypatch.chdir(isolated / "src")
    app = App(None, None)
    app.settings()
    assert app.root_options() == ["--data-dir", str(isolated / ".agentd")]


# -- ~ and folders that cannot be one ---------------------------------------------------------------


def test_a_tilde_in_data_dir_is_the_home_folder(agentd, isolated: Path) -> None:
    home = isolated / "home"
    home.mkdir()
    env = {"HOME": str(home), "AGENTD_DATA_DIR": "~/agentd-state"}

    task_id = ok(agentd("task", "submit", "write the release notes", env=env)).strip()

    assert (home / "agentd-state" / "agentd.db").is_file()
    assert not (isolated / "~").exists()
    assert task_id in ok(agentd("task", "list", env=env))


def test_a_tilde_is_expanded_in_every_path_setting(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(isolated / "home"))
    (isolated / "agentd.toml").write_text(
        'data_dir = "~/state"\nworkspace = "~/work"\nmodels_dir = "~/models"\n'
        'skills_dirs = ["~/skills", "skills"]\nplugins = ["~/tools.py"]\nmodel = "~/models/mine.gguf"\n'
    )
    s = load_settings(environ={})
    home = isolated / "home"
    assert (s.data_dir, s.workspace, s.models_dir) == (home / "state", home / "work", home / "models")
    assert s.skills_dirs == (home / "skills", Path("skills"))
    assert s.plugins == (home / "tools.py",)
    assert s.model == str(home / "models" / "mine.gguf")


@pytest.mark.parametrize("source", ["environment", "file"])
def test_a_data_dir_that_is_a_file_is_one_line_and_exit_1(agentd, isolated: Path, source: str) -> None:
    (isolated / "notes").write_text("not a folder\n")
    env = {"AGENTD_DATA_DIR": "notes"} if source == "environment" else {}
    if source == "file":
        (isolated / "agentd.toml").write_text('data_dir = "notes"\n')

    for args in (["task", "submit", "write the release notes"], ["task", "list"]):
        one_error_line(agentd(*args, env=env), 1, "notes", "not a folder")
    assert (isolated / "notes").read_text() == "not a folder\n"


@pytest.mark.parametrize("where", ["under a file", "under /proc"])
def test_a_data_dir_that_cannot_be_created_is_one_line_and_exit_1(agentd, isolated: Path, where: str) -> None:
    (isolated / "notes").write_text("not a folder\n")
    data_dir = isolated / "notes" / "state" if where == "under a file" else Path("/proc/agentd-state")

    result = agentd("task", "submit", "write the release notes", env={"AGENTD_DATA_DIR": str(data_dir)})

    one_error_line(result, 1, data_dir)
    assert (isolated / "notes").read_text() == "not a folder\n"

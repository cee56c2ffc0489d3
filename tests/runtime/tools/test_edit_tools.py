"""The edit tools and the workspace survey, on real files: a change named by itself, and the layout a task starts
from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.artifacts import ArtifactStore
from runtime.tools import AppendFile, EditFile, ToolContext, execute
from runtime.tools.edits import WHOLE_FILE_LINES
from runtime.tools.workspace import survey


@pytest.fixture
def ctx(tmp_path: Path, workspace: Path) -> ToolContext:
    return ToolContext(
        task_id="task-1", tenant="acme", actor="agent", workspace=workspace,
        artifacts=ArtifactStore(workspace / ".agentd" / "artifacts"), protected=(workspace / ".agentd",),
    )


def test_edit_file_replaces_every_place_and_shows_the_changed_lines(ctx, workspace) -> None:
    (workspace / "app.py").write_text('def greet(name):\n    return name\n\nprint(greet("tidy"))\n')
    outcome = execute(EditFile(), ctx, {"path": "app.py", "old": "greet", "new": "welcome"})
    assert outcome.status == "ok", outcome.observation
    assert (workspace / "app.py").read_text() == 'def welcome(name):\n    return name\n\nprint(welcome("tidy"))\n'
    assert outcome.observation["replaced"] == 2
    assert outcome.observation["changed_lines"] == ["def welcome(name):", 'print(welcome("tidy"))']


def test_a_number_or_word_is_replaced_where_it_stands_whole_not_inside_a_longer_one(ctx, workspace) -> None:
    # Seen on the default model: old "8", new "19" for the retries also made the port 9840 into 91940.
    config = '{\n  "port": 9840,\n  "retries": 8,\n  "greeting": "greetings"\n}\n'
    (workspace / "app.json").write_text(config)
    outcome = execute(EditFile(), ctx, {"path": "app.json", "old": "8", "new": "19"})
    assert outcome.observation["replaced"] == 1
    assert (workspace / "app.json").read_text() == config.replace(": 8,", ": 19,")
    execute(EditFile(), ctx, {"path": "app.json", "old": "greeting", "new": "salute"})
    assert '"salute": "greetings"' in (workspace / "app.json").read_text()


def test_text_that_stands_nowhere_whole_is_replaced_wherever_it_occurs(ctx, workspace) -> None:
    (workspace / "README.md").write_text("We recieved it.\nYou recieved them.\n")
    outcome = execute(EditFile(), ctx, {"path": "README.md", "old": "recieve", "new": "receive"})
    assert outcome.observation["replaced"] == 2
    assert (workspace / "README.md").read_text() == "We received it.\nYou received them.\n"


def test_an_edit_of_a_short_file_shows_the_whole_file_after_it(ctx, workspace) -> None:
    (workspace / "app.toml").write_text('debug = true\nport = 8080\nlog_level = "info"\n')
    outcome = execute(EditFile(), ctx, {"path": "app.toml", "old": "debug = true", "new": "debug = false"})
    assert outcome.observation["file_after"] == 'debug = false\nport = 8080\nlog_level = "info"\n'
    assert outcome.observation["old_names_left"] is None


def test_an_edit_of_a_long_file_shows_only_the_changed_lines(ctx, workspace) -> None:
    (workspace / "long.txt").write_text("".join(f"line {n}\n" for n in range(WHOLE_FILE_LINES)) + "the end\n")
    outcome = execute(EditFile(), ctx, {"path": "long.txt", "old": "the end", "new": "The end."})
    assert outcome.observation["file_after"] is None
    assert outcome.observation["changed_lines"] == ["The end."]


def test_an_edit_that_renames_one_use_points_at_the_uses_left(ctx, workspace) -> None:
    (workspace / "app.py").write_text('def greet(name):\n    return name\n\nprint(greet("tidy"))\n')
    outcome = execute(EditFile(), ctx, {"path": "app.py", "old": "def greet(name):", "new": "def welcome(name):"})
    assert outcome.observation["old_names_left"] == 'line 4 still has greet: print(greet("tidy"))'


def test_a_changed_value_is_not_reported_as_a_name_left_elsewhere(ctx, workspace) -> None:
    (workspace / "app.toml").write_text("debug = true\nverbose = true\n")
    outcome = execute(EditFile(), ctx, {"path": "app.toml", "old": "debug = true", "new": "debug = false"})
    assert outcome.observation["old_names_left"] is None


def test_edit_file_with_text_the_file_lacks_changes_nothing_and_shows_the_closest_lines(ctx, workspace) -> None:
    (workspace / "app.toml").write_text("debug = true\nport = 8080\n")
    outcome = execute(EditFile(), ctx, {"path": "app.toml", "old": "debug_mode = true", "new": "debug_mode = false"})
    assert (outcome.status, outcome.error) == ("error", "text_not_found")
    assert "debug = true" in outcome.observation["details"]["closest_lines"]
    assert (workspace / "app.toml").read_text() == "debug = true\nport = 8080\n"
    assert outcome.artifact_events == ()


def test_an_edit_that_would_change_nothing_is_refused_and_writes_nothing(ctx, workspace) -> None:
    (workspace / "README.md").write_text("You should recieve an answer.\n")
    outcome = execute(EditFile(), ctx, {"path": "README.md", "old": "recieve", "new": "recieve"})
    assert (outcome.status, outcome.error) == ("invalid_arguments", "invalid_arguments")
    assert "new is the same as old" in outcome.observation["message"]
    assert outcome.artifact_events == ()
    assert (workspace / "README.md").read_text() == "You should recieve an answer.\n"


def test_edit_file_can_delete_text(ctx, workspace) -> None:
    (workspace / "README.md").write_text("Hello  world\n")
    assert execute(EditFile(), ctx, {"path": "README.md", "old": " ", "new": ""}).status == "ok"
    assert (workspace / "README.md").read_text() == "Helloworld\n"


def test_append_file_adds_lines_on_their_own_line_and_keeps_the_rest(ctx, workspace) -> None:
    (workspace / "todo.txt").write_text("- write the notes\n- fix the bug")  # no newline at the end
    outcome = execute(AppendFile(), ctx, {"path": "todo.txt", "text": "- buy milk"})
    assert outcome.status == "ok", outcome.observation
    assert (workspace / "todo.txt").read_text() == "- write the notes\n- fix the bug\n- buy milk\n"
    assert outcome.observation["last_lines"][-1] == "- buy milk" and outcome.observation["lines"] == 3


@pytest.mark.parametrize("tool", [EditFile(), AppendFile()])
def test_the_edit_tools_refuse_what_the_file_tools_refuse(ctx, workspace, tmp_path, tool) -> None:
    (tmp_path / "outside.txt").write_text("secret\n")
    (workspace / "image.bin").write_bytes(b"\x89PNG\x00\x01")
    extra = {"old": "a", "new": "b"} if isinstance(tool, EditFile) else {"text": "a"}
    cases = {
        "../outside.txt": "outside_workspace",
        ".agentd/artifacts/x": "protected_path",
        "missing.txt": "not_found",
        "image.bin": "binary_file",
        ".": "is_directory",
    }
    for path, code in cases.items():
        outcome = execute(tool, ctx, {"path": path, **extra})
        assert outcome.error == code, (path, outcome.observation)
    assert (tmp_path / "outside.txt").read_text() == "secret\n"


def test_the_edit_tools_are_never_retried_and_never_repeated_silently() -> None:
    """Twice is not once: a second append adds the lines again, a second edit replaces in the first one's result."""
    assert not EditFile().contract.idempotent and not AppendFile().contract.idempotent


def test_the_survey_lists_the_workspace_breadth_first_without_agentds_data(ctx, workspace) -> None:
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "pkg" / "deep.py").write_text("")
    (workspace / "src" / "app.py").write_text("")
    (workspace / "README.md").write_text("")
    (workspace / ".git" / "objects").mkdir(parents=True)
    (workspace / ".agentd").mkdir()
    (workspace / ".agentd" / "agentd.db").write_text("")
    entries, complete = survey(ctx)
    assert entries == [".git/", "README.md", "src/", "src/app.py", "src/pkg/", "src/pkg/deep.py"]
    assert complete, "everything fit"


def test_a_survey_over_its_limit_says_it_is_not_the_whole_workspace(ctx, workspace) -> None:
    for i in range(5):
        (workspace / f"d{i}").mkdir()
        (workspace / f"d{i}" / "f.txt").write_text("")
    entries, complete = survey(ctx, limit=7)
    assert entries[:5] == ["d0/", "d1/", "d2/", "d3/", "d4/"] and len(entries) == 7
    assert not complete


def test_an_unreadable_folder_makes_the_survey_incomplete(ctx, workspace, monkeypatch) -> None:
    (workspace / "locked").mkdir()
    (workspace / "open.txt").write_text("")
    real_scandir = os.scandir

    def scandir(path):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    # Root reads any folder, so the refusal a user without the right would meet is made here.
    monkeypatch.setattr(os, "scandir", scandir)
    entries, complete = survey(ctx)
    assert entries == ["locked/", "open.txt"] and not complete

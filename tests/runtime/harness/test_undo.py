"""Every change a task makes to a file is kept, shown as a diff and can be undone.

The three todo.txt runs and the version bump below are the ones a new user met on the default model,
replayed with a scripted model: the same calls and answers, so the loop, the tools, the log and the
commands are the real ones."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.tools import Effect, Tool, ToolContract
from store.events import (
    AnswerGiven,
    ApprovalGranted,
    ApprovalRequested,
    FileChanged,
    FileRestored,
    ProposalRejected,
    Restore,
    RestoreFinished,
    RestoreStarted,
    TaskPhaseChanged,
    ToolCallExecuted,
)
from tests.helpers import answer, call, events, run, scripted_runtime, submit

TODO = b"- buy milk\n- call the plumber\n"


@pytest.fixture
def todo_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "todo.txt").write_bytes(TODO)
    return ws


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# The issue's requests said "Add the line ..."; a call that would remove a line the request does not touch
# is now refused before it runs (tests below). These ask for the replacement, so the same calls run, and
# what they did is shown and undone, as for any change a request asks for.
PUT = 'Replace the list in todo.txt with the line "- water the plants"'


def todo_task(store, data_dir, workspace, replies, goal=PUT) -> str:
    rt = scripted_runtime(store, data_dir, replies)
    task_id = submit(store, workspace, goal, allowed_effects=("read", "write"))
    run(rt, task_id)
    return task_id


# -- the user's three todo.txt runs --------------------------------------------------------------


def test_an_edit_that_replaced_an_item_is_shown_in_the_diff_and_undone_to_the_exact_bytes(
    store, data_dir, todo_workspace, agentd
) -> None:
    task_id = todo_task(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("edit_file", path="todo.txt", old="buy milk", new="- water the plants"),
        answer("todo.txt was successfully updated; the file size was increased by 100 characters."),
    ])
    assert (todo_workspace / "todo.txt").read_bytes() == b"- - water the plants\n- call the plumber\n"
    [changed] = events(store, task_id, FileChanged)
    assert (changed.path, changed.before_sha256, changed.after_sha256) == (
        "todo.txt", sha(TODO), sha((todo_workspace / "todo.txt").read_bytes())
    )
    # The model saw what it removed, in the call's own result and beside its next decision.
    executed = [e for e in events(store, task_id, ToolCallExecuted) if e.tool == "edit_file"]
    assert "-- buy milk" in executed[0].observation["diff"]

    shown = agentd("task", "diff", task_id)
    assert shown.returncode == 0, shown.stderr
    assert "-- buy milk\n" in shown.stdout and "+- - water the plants\n" in shown.stdout
    assert "c2 edit_file: todo.txt changed (+1 -1)" in shown.stdout

    undone = agentd("task", "undo", task_id)
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout == "put back todo.txt\n"
    assert (todo_workspace / "todo.txt").read_bytes() == TODO


def test_a_task_that_took_in_a_notification_is_undone_like_any_other(store, data_dir, todo_workspace, agentd) -> None:
    # An approval decided, a file saved, a job done: each reaches the task as a notification it admits,
    # and undo folds the task with the notifications it was sent.
    from notifications.queue import enqueue, new_notification
    from store.events import NotificationsAdmitted

    rt = scripted_runtime(store, data_dir, [
        call("read_file", path="todo.txt"),
        call("write_file", path="todo.txt", content="- water the plants\n"),
        answer("todo.txt now holds one line."),
    ])
    task_id = submit(store, todo_workspace, PUT, allowed_effects=("read", "write"))
    run(rt, task_id, max_decisions=1)
    enqueue(store, new_notification(source="operator", kind="note", tasks=[task_id], text="The build finished."))
    run(rt, task_id)
    assert events(store, task_id, NotificationsAdmitted), "the notification was taken in"
    assert (todo_workspace / "todo.txt").read_bytes() == b"- water the plants\n"

    undone = agentd("task", "undo", task_id)
    assert undone.returncode == 0, undone.stderr
    assert (todo_workspace / "todo.txt").read_bytes() == TODO


def test_an_append_followed_by_an_edit_over_an_item_is_undone_whole(store, data_dir, todo_workspace, agentd) -> None:
    task_id = todo_task(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("append_file", path="todo.txt", text="- water the plants"),
        call("edit_file", path="todo.txt", old="- buy milk", new="- water the plants"),
        answer("todo.txt has been updated."),
    ], goal=PUT)
    assert b"buy milk" not in (todo_workspace / "todo.txt").read_bytes()
    shown = agentd("task", "diff", task_id, "--json")
    diffs = json.loads(shown.stdout)
    assert [(d["by"], d["added"], d["removed"]) for d in diffs] == [("c2 append_file", 1, 0), ("c3 edit_file", 1, 1)]
    assert "-- buy milk" in diffs[1]["diff"]

    assert agentd("task", "undo", task_id).returncode == 0
    assert (todo_workspace / "todo.txt").read_bytes() == TODO


def test_a_write_over_the_list_is_shown_with_every_line_it_lost_and_undone(
    store, data_dir, todo_workspace, agentd
) -> None:
    task_id = todo_task(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("append_file", path="todo.txt", text="- water the plants"),
        call("write_file", path="todo.txt", content="- water the plants"),
        answer("The user added the item  to todo.txt."),
    ])
    assert (todo_workspace / "todo.txt").read_bytes() == b"- water the plants"
    shown = agentd("task", "diff", task_id, "--path", "todo.txt")
    assert "-- buy milk\n-- call the plumber\n" in shown.stdout
    assert agentd("task", "undo", task_id).returncode == 0
    assert (todo_workspace / "todo.txt").read_bytes() == TODO


def test_task_show_lists_the_files_changed_with_their_line_counts(store, data_dir, todo_workspace, agentd) -> None:
    task_id = todo_task(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("append_file", path="todo.txt", text="- water the plants"),
        answer("I added the line to todo.txt."),
    ])
    shown = agentd("task", "show", task_id)
    assert shown.returncode == 0, shown.stderr
    assert "todo.txt (+1 -0)" in shown.stdout


def test_the_issues_add_requests_have_the_call_that_would_remove_an_item_refused_before_it_runs(
    store, data_dir, todo_workspace
) -> None:
    for goal, removing in [
        ('Add the line "- water the plants" to todo.txt',
         call("edit_file", path="todo.txt", old="buy milk", new="- water the plants")),
        ('Append a new last line "- water the plants" to todo.txt, keeping the existing lines',
         call("write_file", path="todo.txt", content="- water the plants")),
    ]:
        (todo_workspace / "todo.txt").write_bytes(TODO)
        task_id = todo_task(store, data_dir, todo_workspace, [
            call("read_file", path="todo.txt"),
            removing,
            call("append_file", path="todo.txt", text="- water the plants"),
            answer("I added the line to todo.txt."),
        ], goal=goal)
        [refused] = events(store, task_id, ProposalRejected)
        assert "which the request does not touch: change only what the request asks; " in refused.error
        assert refused.error.endswith("; to add lines, use append_file")
        assert (todo_workspace / "todo.txt").read_bytes() == TODO + b"- water the plants\n"
        assert events(store, task_id, TaskPhaseChanged)[-1].phase == "completed"


# -- an answer checked against what the task recorded ----------------------------------------------


def test_a_bump_claimed_after_a_failed_edit_is_refused_and_then_fails_the_task(store, data_dir, tmp_path) -> None:
    ws = tmp_path / "project"
    (ws / "config").mkdir(parents=True)
    (ws / "config" / "settings.yaml").write_text("name: birdlog\nversion: 0.7.1\n")
    task_id = todo_task(store, data_dir, ws, [
        call("read_file", path="config/settings.yaml"),
        call("edit_file", path="config/settings.yaml", old="0.7.0", new="0.8.0"),
        answer("The project version was bumped to 0.8.0."),
        answer("The project version was bumped to 0.8.0."),
    ], goal="Bump the project version to 0.8.0")
    [rejected, again] = events(store, task_id, ProposalRejected)
    assert "edit_file failed: text_not_found; nothing was changed" in rejected.error
    assert again.error == rejected.error.split("; answer saying")[0]
    assert events(store, task_id, TaskPhaseChanged)[-1].phase == "failed"
    assert "nothing was changed" in events(store, task_id, TaskPhaseChanged)[-1].reason
    assert events(store, task_id, AnswerGiven) == []
    assert (ws / "config" / "settings.yaml").read_text() == "name: birdlog\nversion: 0.7.1\n"


def test_a_rename_claimed_after_only_an_append_is_refused_and_then_fails_the_task(store, data_dir, tmp_path) -> None:
    # Seen on the default model on an unseen suite: the rename appended as a second function, then claimed.
    ws = tmp_path / "project"
    ws.mkdir()
    helpers = "def parse_records(items):\n    return items\n\n\ndef load(items):\n    return parse_records(items)\n"
    (ws / "helpers.py").write_text(helpers)
    claim = "The function parse_records was renamed to gather_records and updated where it is called."
    task_id = todo_task(store, data_dir, ws, [
        call("read_file", path="helpers.py"),
        call("append_file", path="helpers.py", text="def gather_records(items): return items"),
        answer(claim),
        answer(claim),
    ], goal="In helpers.py, rename the function parse_records to gather_records, and update where it is called.")
    [rejected, again] = events(store, task_id, ProposalRejected)
    assert "the task only added lines to helpers.py" in rejected.error
    assert again.error == rejected.error.split("; answer saying")[0]
    assert events(store, task_id, TaskPhaseChanged)[-1].phase == "failed"
    assert events(store, task_id, AnswerGiven) == []


def test_a_typo_claimed_fixed_while_it_is_still_there_is_refused_and_the_retry_fixes_it(
    store, data_dir, tmp_path
) -> None:
    # Seen on the default model (examples/evals fix_readme_typo): "corrected" answered with the typo still
    # in README.md.
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "README.md").write_text("# tidy\n\nYou will recieve a mail.\nInstall: pip install tidy-tasks\n")
    task_id = todo_task(store, data_dir, ws, [
        call("read_file", path="README.md"),
        call("edit_file", path="README.md", old="# tidy", new="# Tidy"),
        answer("I corrected 'recieve' to 'receive' in README.md."),
        call("edit_file", path="README.md", old="recieve", new="receive"),
        answer("The typo is fixed: README.md says 'receive' now, and the title is Tidy."),
    ], goal="README.md has a spelling mistake: 'recieve'. Please fix it, and make the title tidy start with a capital.")
    [rejected] = events(store, task_id, ProposalRejected)
    assert 'README.md has "recieve" as often as before the task' in rejected.error, rejected.error
    assert events(store, task_id, TaskPhaseChanged)[-1].phase == "completed"
    assert (ws / "README.md").read_text() == "# Tidy\n\nYou will receive a mail.\nInstall: pip install tidy-tasks\n"


def test_a_fix_claimed_in_no_words_of_its_own_is_held_to_the_text_the_request_named(store, data_dir, tmp_path) -> None:
    # Seen on the default model (examples/evals fix_readme_typo): "The spelling mistake ... has been
    # corrected" after an edit of another line; the answer names no text, the request does.
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "README.md").write_text("# tidy\n\nYou will recieve a mail.\n")
    task_id = todo_task(store, data_dir, ws, [
        call("read_file", path="README.md"),
        call("edit_file", path="README.md", old="a mail.", new="a mail soon."),
        answer("The spelling mistake in README.md has been corrected."),
        call("edit_file", path="README.md", old="recieve", new="receive"),
        answer("README.md says 'receive' now."),
    ], goal="README.md has a spelling mistake: 'recieve'. Please fix it.")
    [rejected] = events(store, task_id, ProposalRejected)
    assert 'README.md has "recieve" as often as before the task' in rejected.error, rejected.error
    assert events(store, task_id, TaskPhaseChanged)[-1].phase == "completed"
    assert (ws / "README.md").read_text() == "# tidy\n\nYou will receive a mail soon.\n"


def test_an_honest_answer_after_a_refused_claim_completes_the_task(store, data_dir, tmp_path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "settings.yaml").write_text("version: 0.7.1\n")
    task_id = todo_task(store, data_dir, ws, [
        call("read_file", path="settings.yaml"),
        call("edit_file", path="settings.yaml", old="0.7.0", new="0.8.0"),
        answer("I have bumped the version to 0.8.0."),
        answer("The version could not be bumped: settings.yaml has 0.7.1, not 0.7.0."),
    ], goal="Bump the project version to 0.8.0")
    assert len(events(store, task_id, ProposalRejected)) == 1
    assert events(store, task_id, AnswerGiven)[0].answer.startswith("The version could not be bumped")
    assert events(store, task_id, TaskPhaseChanged)[-1].phase == "completed"


def test_an_answer_that_copies_a_tools_description_is_refused(store, data_dir, todo_workspace) -> None:
    from runtime.tools import WriteFile

    task_id = todo_task(store, data_dir, todo_workspace, [
        answer(WriteFile.contract.description),
        call("write_file", path="CONTRIBUTORS.txt", content="Mila\nJoost\n"),
        answer("CONTRIBUTORS.txt now lists Mila and Joost."),
    ], goal="Create CONTRIBUTORS.txt listing Mila and Joost")
    [rejected] = events(store, task_id, ProposalRejected)
    assert "repeats what you were told" in rejected.error
    assert (todo_workspace / "CONTRIBUTORS.txt").read_text() == "Mila\nJoost\n"


def test_an_append_that_copies_the_files_lines_is_refused_and_nothing_is_added(store, data_dir, tmp_path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    rows = "id,item,stock\n540,clamps,39\n541,bolts,23\n"
    (ws / "inventory.csv").write_text(rows)
    task_id = todo_task(store, data_dir, ws, [
        call("read_file", path="inventory.csv"),
        call("append_file", path="inventory.csv", text="540,clamps,39\n541,bolts,23\n548,dowels,5\n"),
        # The retry is not offered the refused tool (rules.not_the_refused_again): the row goes in by an edit.
        call("edit_file", path="inventory.csv", old="541,bolts,23", new="541,bolts,23\n548,dowels,5"),
        answer("I added the row for dowels."),
    ], goal="Add a row to inventory.csv: id 548, item dowels, stock 5.")
    [rejected] = events(store, task_id, ProposalRejected)
    assert "which it already has: give text only the new lines the request asks for" in rejected.error
    assert (ws / "inventory.csv").read_text() == rows + "548,dowels,5\n"


def test_the_request_handed_back_as_the_answer_is_refused(store, data_dir, todo_workspace) -> None:
    goal = "Copy the first item of my todo list (todo.txt) into a new file next.txt."
    task_id = todo_task(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("write_file", path="next.txt", content="- buy milk\n"),
        answer(goal),
        answer("next.txt now holds the first item, buy milk."),
    ], goal=goal)
    [rejected] = events(store, task_id, ProposalRejected)
    assert "repeats what you were told" in rejected.error
    assert events(store, task_id, AnswerGiven)[0].answer == "next.txt now holds the first item, buy milk."


def test_a_result_handed_back_as_the_answer_is_refused_and_on_the_last_try_fails_a_task_that_changed_nothing(
    store, data_dir, todo_workspace
) -> None:
    # Seen on the default model: a write task that changed nothing answered with a tool's result as it
    # came, and completed.
    result = '{"status": "ok", "lines": 2}'
    task_id = todo_task(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"), answer(result), answer(result), answer(result),
    ], goal='Add the line "- water the plants" to todo.txt')
    rejected = events(store, task_id, ProposalRejected)
    assert len(rejected) == 3
    assert "repeats what you were told" in rejected[0].error
    [*_, ended] = events(store, task_id, TaskPhaseChanged)
    assert ended.phase == "failed" and ended.reason.startswith("no answer was given")
    assert events(store, task_id, AnswerGiven) == []
    assert (todo_workspace / "todo.txt").read_bytes() == TODO


def test_an_earlier_refusal_handed_back_as_the_answer_is_refused(store, data_dir, todo_workspace) -> None:
    # Seen: a call refused, another refusal after it, then that first refusal's text as the whole answer.
    task_id = todo_task(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"),
        call("read_file", path="todo.txt"),
        call("edit_file", path="todo.txt", old="- buy bread", new="- buy bread\n- water the plants"),
        answer("I added the line to todo.txt."),
        answer("There is no tool 'read_file' in this step; the tools are: append_file, edit_file, write_file."),
        answer("The line was not added: edit_file found no '- buy bread' in todo.txt."),
    ], goal='Add the line "- water the plants" to todo.txt')
    no_tool, unbacked, echo = events(store, task_id, ProposalRejected)
    assert "there is no tool 'read_file'" in no_tool.error
    assert "nothing was changed" in unbacked.error
    assert "repeats what you were told" in echo.error
    assert events(store, task_id, AnswerGiven)[0].answer.startswith("The line was not added")
    assert (todo_workspace / "todo.txt").read_bytes() == TODO


def test_on_the_last_try_a_poor_answer_stands_when_the_work_is_done(store, data_dir, todo_workspace) -> None:
    result = '{"status": "ok", "lines": 3}'
    task_id = todo_task(store, data_dir, todo_workspace, [
        call("read_file", path="todo.txt"), call("append_file", path="todo.txt", text="- water the plants"),
        answer(result), answer(result), answer(result),
    ], goal='Add the line "- water the plants" to todo.txt')
    assert events(store, task_id, TaskPhaseChanged)[-1].phase == "completed"
    assert [a.answer for a in events(store, task_id, AnswerGiven)] == [result]


# -- undo's checks ---------------------------------------------------------------------------------


def two_file_task(store, data_dir, workspace) -> str:
    (workspace / "notes.txt").write_text("first\n")
    return todo_task(store, data_dir, workspace, [
        call("read_file", path="todo.txt"),
        call("append_file", path="todo.txt", text="- water the plants"),
        call("read_file", path="notes.txt"),
        call("append_file", path="notes.txt", text="second"),
        answer("I added a line to todo.txt and one to notes.txt."),
    ], goal="Add the line '- water the plants' to todo.txt and the line 'second' to notes.txt")


def test_undo_refuses_a_file_someone_else_changed_since_and_touches_nothing(
    store, data_dir, todo_workspace, agentd
) -> None:
    task_id = two_file_task(store, data_dir, todo_workspace)
    (todo_workspace / "notes.txt").write_text("first\nsecond\nthe user's own line\n")
    todo_after = (todo_workspace / "todo.txt").read_bytes()
    version = store.read_stream(task_id)[-1].stream_version

    refused = agentd("task", "undo", task_id)
    assert refused.returncode == 1
    assert refused.stderr.strip() == "agentd: notes.txt was changed after the task changed it; nothing was undone"
    assert (todo_workspace / "notes.txt").read_text() == "first\nsecond\nthe user's own line\n"
    assert (todo_workspace / "todo.txt").read_bytes() == todo_after
    assert store.read_stream(task_id)[-1].stream_version == version

    # The file nobody else touched can still be undone on its own.
    assert agentd("task", "undo", task_id, "--path", "todo.txt").returncode == 0
    assert (todo_workspace / "todo.txt").read_bytes() == TODO


def test_a_dry_run_says_what_undo_would_do_and_changes_nothing(store, data_dir, todo_workspace, agentd) -> None:
    task_id = two_file_task(store, data_dir, todo_workspace)
    before = {p.name: p.read_bytes() for p in todo_workspace.iterdir()}
    shown = agentd("task", "undo", task_id, "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "would put back todo.txt\nwould put back notes.txt\n"
    assert {p.name: p.read_bytes() for p in todo_workspace.iterdir()} == before
    assert events(store, task_id, RestoreStarted) == []


def test_undo_deletes_what_the_task_created_restores_what_it_deleted_and_redo_makes_it_again(
    store, data_dir, todo_workspace, agentd
) -> None:
    (todo_workspace / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(todo_workspace / "run.sh", 0o755)
    rt = scripted_runtime(store, data_dir, [
        call("shell", command="rm run.sh && printf 'Mila\\nJoost\\n' > CONTRIBUTORS.txt"),
        answer("I removed run.sh and created CONTRIBUTORS.txt."),
    ])
    task_id = submit(store, todo_workspace, "Run `rm run.sh && printf 'Mila\\nJoost\\n' > CONTRIBUTORS.txt`",
                     allowed_effects=("read", "write", "external"))
    assert run(rt, task_id) == "awaiting_approval"
    [request] = events(store, task_id, ApprovalRequested)
    store.append(task_id, [ApprovalGranted(approval_id=request.approval_id, by="ann")], actor="ann")
    assert run(rt, task_id) == "completed"
    changed = {e.path: (e.before_sha256 is None, e.after_sha256 is None) for e in events(store, task_id, FileChanged)}
    assert changed == {"CONTRIBUTORS.txt": (True, False), "run.sh": (False, True)}

    assert agentd("task", "undo", task_id).stdout == "delete CONTRIBUTORS.txt\nrecreate run.sh\n"
    assert not (todo_workspace / "CONTRIBUTORS.txt").exists()
    assert (todo_workspace / "run.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert os.stat(todo_workspace / "run.sh").st_mode & 0o777 == 0o755

    again = agentd("task", "undo", task_id)
    assert again.returncode == 1 and "nothing to undo" in again.stderr

    assert agentd("task", "redo", task_id).returncode == 0
    assert (todo_workspace / "CONTRIBUTORS.txt").read_text() == "Mila\nJoost\n"
    assert not (todo_workspace / "run.sh").exists()


def test_undo_of_a_running_task_or_an_unknown_one_is_refused_in_one_line(
    store, data_dir, todo_workspace, agentd
) -> None:
    task_id = submit(store, todo_workspace, "Add a line to todo.txt", allowed_effects=("read", "write"))
    running = agentd("task", "undo", task_id)
    assert running.returncode == 1 and running.stderr.count("\n") == 1
    assert running.stderr == (
        f"agentd: task {task_id} is submitted; cancel it or let it finish before its changes are undone\n"
    )
    unknown = agentd("task", "undo", "t-nope")
    assert unknown.returncode == 1 and unknown.stderr == "agentd: no task 't-nope'\n"
    wrong_path = agentd("task", "diff", task_id, "--path", "other.txt")
    assert wrong_path.returncode == 1 and wrong_path.stderr == "agentd: the task did not change other.txt\n"


def test_an_undo_interrupted_after_its_first_file_is_finished_by_the_next_one(
    store, data_dir, todo_workspace, agentd
) -> None:
    task_id = two_file_task(store, data_dir, todo_workspace)
    [todo, notes] = events(store, task_id, FileChanged)
    # What a crash leaves: the restore recorded, todo.txt put back and recorded, notes.txt not yet.
    store.append(task_id, [RestoreStarted(restore_id="r-1", kind="undo", by="cli", files=(
        Restore(path="todo.txt", from_sha256=todo.after_sha256, to_sha256=todo.before_sha256),
        Restore(path="notes.txt", from_sha256=notes.after_sha256, to_sha256=notes.before_sha256),
    ))], actor="cli")
    (todo_workspace / "todo.txt").write_bytes(TODO)
    store.append(task_id, [FileRestored(restore_id="r-1", kind="undo", path="todo.txt",
                                        from_sha256=todo.after_sha256, to_sha256=todo.before_sha256)], actor="cli")

    finished = agentd("task", "undo", task_id)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == "finished an interrupted undo or redo first: notes.txt\n"
    assert (todo_workspace / "notes.txt").read_text() == "first\n"
    assert (todo_workspace / "todo.txt").read_bytes() == TODO
    assert [e.skipped for e in events(store, task_id, RestoreFinished)] == [()]


def test_an_undo_killed_at_any_moment_leaves_every_file_whole_and_the_next_undo_finishes_it(
    store, data_dir, todo_workspace, agentd
) -> None:
    names = [f"f{i:03}.txt" for i in range(60)]
    for name in names:
        (todo_workspace / name).write_text(f"{name} before\n")
    command = " && ".join(f"echo after >> {n}" for n in names)
    rt = scripted_runtime(store, data_dir, [call("shell", command=command), answer("I appended to every file.")])
    task_id = submit(store, todo_workspace, f"Run `{command}`", allowed_effects=("read", "write", "external"))
    run(rt, task_id)
    [request] = events(store, task_id, ApprovalRequested)
    store.append(task_id, [ApprovalGranted(approval_id=request.approval_id, by="ann")], actor="ann")
    assert run(rt, task_id) == "completed"
    assert len(events(store, task_id, FileChanged)) == 60

    proc = subprocess.Popen([sys.executable, "-m", "runtime.cli", "task", "undo", task_id],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not events(store, task_id, FileRestored) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for name in names:
        assert (todo_workspace / name).read_text() in (f"{name} before\n", f"{name} before\nafter\n")
    finishing = agentd("task", "undo", task_id)
    assert finishing.returncode in (0, 1), finishing.stderr
    for name in names:
        assert (todo_workspace / name).read_text() == f"{name} before\n"
    assert len(events(store, task_id, RestoreFinished)) == 1


# -- what is recorded, whatever the tool -----------------------------------------------------------


class _Stamp(Tool):
    """A plugin tool with the write effect that writes a file its arguments do not name."""

    def __init__(self) -> None:
        from pydantic import BaseModel, ConfigDict

        class Args(BaseModel):
            model_config = ConfigDict(extra="forbid")
            text: str

        class Out(BaseModel):
            ok: bool

        self.contract = ToolContract(
            name="stamp", description="Stamp the workspace.", input_model=Args, output_model=Out,
            effects=[Effect.WRITE], idempotent=False, scope="workspace", timeout_s=5,
        )

    def run(self, ctx, args):
        (ctx.workspace / "STAMP").write_text(args.text)
        (ctx.workspace / "todo.txt").unlink()
        return {"ok": True}


def test_a_plugin_tool_that_writes_is_recorded_over_the_whole_workspace(store, data_dir, todo_workspace) -> None:
    from runtime.agent.profiles import WORKSPACE

    profile = WORKSPACE.model_copy(update={"name": "stamping", "tools": ("stamp",)})
    rt = scripted_runtime(store, data_dir, [call("stamp", text="done"), answer("I stamped the workspace.")],
                          tools=[_Stamp()])
    rt.profiles["stamping"] = profile
    task_id = submit(store, todo_workspace, "Stamp it", allowed_effects=("read", "write"), profile="stamping")
    assert run(rt, task_id) == "completed"
    assert {e.path: e.after_sha256 is None for e in events(store, task_id, FileChanged)} == {
        "STAMP": False, "todo.txt": True
    }


def test_a_workspace_too_large_to_record_waits_for_a_person_and_never_runs_unrecorded(
    store, data_dir, todo_workspace
) -> None:
    from runtime.agent.profiles import WORKSPACE
    from runtime.tools.snapshot import Limit

    profile = WORKSPACE.model_copy(update={"name": "stamping", "tools": ("stamp",)})
    rt = scripted_runtime(store, data_dir, [call("stamp", text="done"), answer("Not stamped.")],
                          tools=[_Stamp()], record_limit=Limit(max_files=1))
    rt.profiles["stamping"] = profile
    (todo_workspace / "other.txt").write_text("x\n")
    task_id = submit(store, todo_workspace, "Stamp it", allowed_effects=("read", "write"), profile="stamping")
    assert run(rt, task_id) == "awaiting_approval"
    [request] = events(store, task_id, ApprovalRequested)
    assert request.unrecorded is not None and "too large to record" in request.unrecorded
    assert not (todo_workspace / "STAMP").exists()


def test_changes_a_crash_left_unrecorded_are_recorded_before_the_call_is_run_again(
    store, data_dir, todo_workspace
) -> None:
    from runtime.artifacts import ArtifactStore
    from runtime.tools import ToolContext
    from runtime.tools.snapshot import take
    from store.events import TaskPhase, ToolCallProposed, ToolCallStarted

    rt = scripted_runtime(store, data_dir, [answer("I added the line.")])
    task_id = submit(store, todo_workspace, "Add a line to todo.txt", allowed_effects=("read", "write"))
    ctx = ToolContext(task_id=task_id, tenant="default", actor="ann", workspace=todo_workspace,
                      artifacts=ArtifactStore(data_dir / "artifacts"))
    before = take(ctx, ("todo.txt",))
    store.append(task_id, [
        TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="started"),
        ToolCallProposed(call_id="c1", tool="append_file", arguments={"path": "todo.txt", "text": "- x"}),
        ToolCallStarted(call_id="c1", tool="append_file", idempotent=False, effects=("write",),
                        recorded=ctx.artifacts.put(before.encode())),
    ], actor="agentd")
    (todo_workspace / "todo.txt").write_bytes(TODO + b"- x\n")  # the call wrote, then agentd died

    assert run(rt, task_id) == "awaiting_approval"
    [changed] = events(store, task_id, FileChanged)
    assert (changed.call_id, changed.before_sha256) == ("c1", sha(TODO))
    run(rt, task_id)
    assert len(events(store, task_id, FileChanged)) == 1  # recorded once, however often the task is looked at


def test_replay_rebuilds_the_artifact_index_with_changes_and_undos(store, data_dir, todo_workspace, agentd) -> None:
    task_id = two_file_task(store, data_dir, todo_workspace)
    assert agentd("task", "undo", task_id, "--path", "notes.txt").returncode == 0
    rows = [(a.path, a.operation, a.before_sha256 is not None) for a in store.task(task_id).artifacts
            if a.operation != "read"]
    assert rows == [("todo.txt", "write", True), ("notes.txt", "write", True), ("notes.txt", "undo", True)]
    replayed = agentd("replay")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_a_skill_scripts_changes_are_recorded_and_undone(store, data_dir, todo_workspace, tmp_path, agentd) -> None:
    skill = tmp_path / "skills" / "tidy-list"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: tidy-list\ndescription: Sorts todo.txt. Use when asked to tidy the list.\n"
        "allowed-tools: run_skill_script\n---\n\nRun scripts/sort.py.\n"
    )
    (skill / "scripts" / "sort.py").write_text(
        "from pathlib import Path\np = Path('todo.txt')\n"
        "p.write_text(''.join(sorted(p.read_text().splitlines(True))))\n"
        "Path('sorted.log').write_text('sorted\\n')\n"
    )
    rt = scripted_runtime(store, data_dir, [
        {"action": "activate_skill", "skill": "tidy-list", "reason": "test"},
        call("run_skill_script", skill="tidy-list", script="scripts/sort.py", args=[]),
        answer("I sorted todo.txt with the skill's script."),
    ], skill_roots=(tmp_path / "skills",))
    from runtime.skills.tools import register_skill_tools

    register_skill_tools(rt.tools)
    (todo_workspace / "todo.txt").write_bytes(b"- water the plants\n" + TODO)
    task_id = submit(store, todo_workspace, "/tidy-list tidy the list", allowed_effects=("read", "write", "external"))
    assert run(rt, task_id) == "completed", events(store, task_id, TaskPhaseChanged)
    assert {e.path for e in events(store, task_id, FileChanged)} == {"todo.txt", "sorted.log"}
    assert agentd("task", "undo", task_id).returncode == 0
    assert (todo_workspace / "todo.txt").read_bytes() == b"- water the plants\n" + TODO
    assert not (todo_workspace / "sorted.log").exists()


def test_the_recording_bound_comes_from_the_settings(store, data_dir, monkeypatch) -> None:
    from runtime.config import load_settings
    from runtime.daemon.wiring import open_runtime
    from runtime.inference.scripted import ScriptedModel
    from runtime.tools.snapshot import Limit

    monkeypatch.setenv("AGENTD_RECORD_MAX_FILES", "3")
    monkeypatch.setenv("AGENTD_RECORD_MAX_MB", "2")
    settings = load_settings(None, data_dir=data_dir)
    rt = open_runtime(settings, store, model=ScriptedModel([]))
    try:
        assert rt.record_limit == Limit(max_files=3, max_bytes=2 * 1024 * 1024)
    finally:
        rt.jobs.close()


def test_an_export_imported_elsewhere_keeps_the_changes_and_the_undo(
    store, data_dir, todo_workspace, agentd, tmp_path
) -> None:
    task_id = two_file_task(store, data_dir, todo_workspace)
    assert agentd("task", "undo", task_id, "--path", "notes.txt").returncode == 0
    exported = tmp_path / "log.jsonl"
    assert agentd("events", "export", "-o", str(exported)).returncode == 0
    other = tmp_path / "other"
    imported = agentd("--data-dir", str(other), "events", "import", str(exported))
    assert imported.returncode == 0, imported.stderr
    here = agentd("task", "diff", task_id, "--json")
    there = agentd("--data-dir", str(other), "task", "diff", task_id, "--json")
    # The other folder has the events, not the artifact store: the same changes, in the same order, without text.
    assert there.returncode == 0, there.stderr
    order = [[(d["path"], d["by"].split()[0], d["kind"]) for d in json.loads(r.stdout)] for r in (here, there)]
    assert order[0] == order[1] == [("todo.txt", "c2", "changed"), ("notes.txt", "c4", "changed"),
                                    ("notes.txt", "undo", "changed")]
    assert "not in this data folder's artifact store" in json.loads(there.stdout)[0]["diff"]
    replayed = agentd("--data-dir", str(other), "replay")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    # Nor can it put back what it does not hold: refused before anything is recorded.
    refused = agentd("--data-dir", str(other), "task", "undo", task_id)
    assert refused.returncode == 1
    assert refused.stderr == (
        "agentd: what todo.txt must be put back to is not in this data folder's artifact store (a log imported "
        "from elsewhere carries no file contents); nothing was undone\n"
    )
    listed = agentd("--data-dir", str(other), "events", "list", "--task", task_id, "--type", "RestoreStarted")
    assert listed.stdout.count("RestoreStarted") == 1, "only the undo the import brought"

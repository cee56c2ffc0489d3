"""Each choice rule as a pure function of what a step may choose and the situation: tool contracts, the
request and the task's recorded events. The tools here have invented names: a rule that holds for them
holds for a plugin's tools as for the built-in ones."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runtime.agent import goal, rules
from runtime.agent.choices import Choices, Situation, choices_for
from runtime.agent.view import TaskView
from runtime.tools import Effect, ToolContract
from store.events import (
    ContentMatched,
    FileChanged,
    MatchedLine,
    Recorded,
    SkillActivated,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
    UserSaid,
    WorkspaceSurveyed,
)

SHA = "0" * 64


class _Path(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str


class _Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    old: str
    new: str


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str


class _Ref(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ref: str


class _Edited(BaseModel):
    path: str
    old_names_left: str | None = None


def tool(name: str, inputs=_Path, *, effects=(Effect.READ,), scope: str = "workspace", output=_Path,
         path_kind: Literal["file", "folder"] | None = None, needs: Literal["artifact", "skill"] | None = None,
         ) -> ToolContract:
    return ToolContract(name=name, description=f"{name} does its job", input_model=inputs, output_model=output,
                        effects=effects, idempotent=True, scope=scope, timeout_s=5, path_kind=path_kind, needs=needs)


# The history knows a file as read from read_file's results (context.KnownPaths), so the reader keeps that name.
FETCH = tool("read_file", path_kind="file")
PUT = tool("put_text", effects=(Effect.WRITE,))
PATCH = tool("patch_text", _Edit, effects=(Effect.WRITE,), path_kind="file", output=_Edited)
EXEC = tool("exec", _Command, effects=(Effect.EXTERNAL,))
PAGE = tool("page_through", _Ref, scope="task", needs="artifact")
SKILL_FILE = tool("skill_file", scope="skill", needs="skill")
CONTRACTS = {c.name: c for c in (FETCH, PUT, PATCH, EXEC, PAGE, SKILL_FILE)}
ALL = tuple(CONTRACTS)


def view_of(goal: str, *events) -> TaskView:
    records = [TaskSubmitted(goal=goal, workspace="/w"), *events]
    return TaskView.of(
        Recorded(seq, "t-1", seq, "2026-12-05T12:00:00Z", "ann", None, None, e) for seq, e in enumerate(records, 1)
    )


def situation(view: TaskView, *, attempt: int = 1, **kw) -> Situation:
    return Situation(view, attempt, goal.own_words(view.transcript.request), CONTRACTS, **kw)


def ran(call_id: str, name: str, arguments: dict, observation: dict | None = None, ref: str | None = None) -> list:
    return [ToolCallProposed(call_id=call_id, tool=name, arguments=arguments, reason="r"),
            ToolCallExecuted(call_id=call_id, tool=name, status="ok", observation=observation or {}, artifact_ref=ref)]


SURVEY = WorkspaceSurveyed(entries=("notes.txt", "todo.txt"), complete=True)


def test_a_tool_that_needs_an_artifact_or_a_skill_waits_until_the_task_holds_one() -> None:
    start = Choices(ALL, (), ())
    none_yet = rules.needs_are_met(start, situation(view_of("Summarise the log")))
    assert set(none_yet.tools) == set(ALL) - {"page_through", "skill_file"}
    held = view_of("Summarise the log", *ran("c1", "exec", {"command": "cat log"}, ref="sha256:" + SHA),
                   SkillActivated(call_index=1, name="csv", content_hash=SHA, folder="/s/csv", body="b"))
    assert rules.needs_are_met(start, situation(held)).tools == ALL


def test_a_tool_offered_on_request_is_a_choice_only_where_the_users_words_ask_for_it() -> None:
    start = Choices(ALL, (), ())
    asked = {"exec": ("run",)}
    assert "exec" not in rules.offered_on_request(start, situation(view_of("What is in notes.txt?"),
                                                                    on_request=asked)).tools
    assert "exec" in rules.offered_on_request(start, situation(view_of("Run the tests"), on_request=asked)).tools
    pasted = view_of("What failed?\n```\nrun the migration now\n```")
    assert "exec" not in rules.offered_on_request(start, situation(pasted, on_request=asked)).tools


def test_a_question_leaves_out_the_tools_that_write_the_workspace() -> None:
    start = Choices(ALL, (), ())
    asked = rules.questions_change_nothing(start, situation(view_of("When is the launch, says notes.txt?")))
    assert set(ALL) - set(asked.tools) == {"put_text", "patch_text"}
    told = rules.questions_change_nothing(start, situation(view_of("Add a line to notes.txt")))
    assert told.tools == ALL


def test_after_a_refusal_the_refused_tool_is_not_offered_again() -> None:
    view = view_of("Fix todo.txt", SURVEY)
    view.last_output = json.dumps({"action": "call_tool", "tool": "put_text", "arguments": {"path": "x"}})
    assert "put_text" not in rules.not_the_refused_again(Choices(ALL, (), ()), situation(view, attempt=2)).tools
    assert rules.not_the_refused_again(Choices(ALL, (), ()), situation(view, attempt=1)).tools == ALL


def test_a_read_asked_for_again_gives_way_to_the_changes_and_a_change_asked_again_to_the_answer() -> None:
    read = view_of("Fix todo.txt", *ran("c1", "read_file", {"path": "todo.txt"}))
    read.last_output = json.dumps({"action": "call_tool", "tool": "read_file", "arguments": {"path": "todo.txt"}})
    after_read = rules.not_the_refused_again(Choices(ALL, ("csv",), ()), situation(read, attempt=2))
    assert set(after_read.tools) == {"put_text", "patch_text", "exec"}
    change = view_of("Fix todo.txt", *ran("c1", "put_text", {"path": "todo.txt"}))
    change.last_output = json.dumps({"action": "call_tool", "tool": "put_text", "arguments": {"path": "todo.txt"}})
    after_change = rules.not_the_refused_again(Choices(ALL, ("csv",), ()), situation(change, attempt=2))
    assert (after_change.tools, after_change.skills) == ((), ())


def test_nothing_is_changed_before_the_file_the_request_points_at_was_read() -> None:
    before = rules.paths_worth_naming(Choices(ALL, (), ()), situation(view_of("Fix the typo in todo.txt", SURVEY)))
    assert "put_text" not in before.tools and "patch_text" not in before.tools
    assert before.paths["read_file"] == ("todo.txt",)
    read = view_of("Fix the typo in todo.txt", SURVEY, *ran("c1", "read_file", {"path": "todo.txt"},
                                                          {"path": "todo.txt"}))
    after = rules.paths_worth_naming(Choices(ALL, (), ()), situation(read))
    assert after.paths["patch_text"] == ("todo.txt",), "only a file whose content the task has seen"
    assert "read_file" not in after.tools, "nothing left worth reading"
    assert after.unseen["put_text"] == ("notes.txt",), "a new file's name is free, but not over an unseen file"


def test_a_new_file_the_request_names_is_written_under_that_name_first() -> None:
    view = view_of("Create a file hello.txt that says hi", SURVEY)
    choices = rules.paths_worth_naming(Choices(ALL, (), ()), situation(view))
    assert choices.paths["put_text"] == ("hello.txt",)
    assert "patch_text" not in choices.tools


def test_paths_stay_free_where_the_task_does_not_know_every_path() -> None:
    view = view_of("Fix todo.txt", WorkspaceSurveyed(entries=("todo.txt",), complete=False))
    assert rules.paths_worth_naming(Choices(ALL, (), ()), situation(view)) == Choices(ALL, (), ())


def test_a_command_the_request_gives_runs_first_as_written() -> None:
    view = view_of("Run `python3 app.py` and tell me what it prints")
    choices = rules.commands_as_given(Choices(ALL, (), ()), situation(view))
    assert choices.commands == {"exec": ("python3 app.py",)}
    done = view_of("Run `python3 app.py` and tell me", *ran("c1", "exec", {"command": "python3 app.py"}))
    assert rules.commands_as_given(Choices(ALL, (), ()), situation(done)).commands == {}


def test_names_an_edit_left_are_what_the_retry_changes() -> None:
    edit = {"path": "app.py", "old": "def greet(", "new": "def welcome("}
    left = {"path": "app.py", "old_names_left": 'line 4 still has greet: print(greet("x"))'}
    view = view_of("Rename greet to welcome in app.py", *ran("c1", "patch_text", edit, left))
    view.rejections.append(f"app.py{rules.NAMES_LEFT}: line 4")
    choices = rules.names_left_are_changed(Choices(ALL, (), ()), situation(view, attempt=2))
    assert choices.tools == ("patch_text",) and choices.values == {"patch_text": {"old": ("greet",)}}
    assert choices.paths == {"patch_text": ("app.py",)}
    changed_since = view_of("Rename greet to welcome in app.py", *ran("c1", "patch_text", edit, left),
                            FileChanged(call_id="c2", path="app.py", before_sha256=SHA, after_sha256=SHA))
    assert rules.names_left(changed_since) is None, "a later change to the file may have taken them out"


def test_an_answer_waits_for_the_results_it_must_rest_on_and_first_calls_come_first() -> None:
    view = view_of("Why is my key failing?")
    waits = rules.answer_after_results(Choices(ALL, (), ()), situation(view, answer_after=("read_file",)))
    assert not waits.answer and "read_file" in waits.unanswerable
    first = rules.calls_first(Choices(ALL, (), ()), situation(view, call_first=("exec",)))
    assert (first.tools, first.answer, first.escalation) == (("exec",), False, False)
    done = view_of("Why?", *ran("c1", "exec", {"command": "x"}))
    assert rules.calls_first(Choices(ALL, (), ()), situation(done, call_first=("exec",))).tools == ALL


def test_the_last_try_offers_only_the_answer_whatever_the_rules_say() -> None:
    view = view_of("Fix todo.txt", SURVEY)
    last = choices_for(ALL, view, 3, "next_step", contracts=CONTRACTS)
    assert last.tools == () and last.last
    final = choices_for(ALL, view, 1, "final_step", contracts=CONTRACTS)
    assert final.tools == () and not final.last


def test_a_request_that_names_no_file_reads_first_the_files_whose_lines_matched_it() -> None:
    matched = ContentMatched(words=("version",), files=2, matches=(
        MatchedLine(path="todo.txt", line=3, text='version = "1.1.0"', score=5.0),))
    view = view_of("Bump the project version to 1.2.0.", SURVEY, matched)
    choices = rules.paths_worth_naming(Choices(ALL, (), ()), situation(view))
    assert choices.paths["read_file"] == ("todo.txt",)
    assert "patch_text" not in choices.tools, "nothing changes before a matched file was read"
    unmatched = rules.paths_worth_naming(Choices(ALL, (), ()), situation(view_of("Bump the version to 1.2.0.", SURVEY)))
    assert unmatched.paths["read_file"] == ("notes.txt", "todo.txt")


def test_the_goals_matches_point_at_nothing_once_the_user_asks_something_else() -> None:
    matched = ContentMatched(words=("version",), files=2, matches=(
        MatchedLine(path="todo.txt", line=3, text='version = "1.1.0"', score=5.0),))
    view = view_of("Bump the project version to 1.2.0.", SURVEY, matched, UserSaid(text="What else is there?"))
    assert rules.paths_worth_naming(Choices(ALL, (), ()), situation(view)).paths["read_file"] == (
        "notes.txt", "todo.txt")


def test_once_a_matched_file_was_read_the_others_may_be_read_too() -> None:
    matched = ContentMatched(words=("release",), files=2, matches=(
        MatchedLine(path="notes.txt", line=1, text="Release: March 3.", score=5.0),))
    view = view_of("When is the release?", SURVEY, matched,
                   *ran("c1", "read_file", {"path": "notes.txt"}, {"path": "notes.txt"}))
    assert rules.paths_worth_naming(Choices(ALL, (), ()), situation(view)).paths["read_file"] == ("todo.txt",)

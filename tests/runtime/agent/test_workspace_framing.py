"""What a task is shown of its workspace and its own steps: the survey, the paths the grammar offers,
the trail of files read and changed, results as lines, and its replies not shown back to it.
Replies are scripted; prompts and grammars are the ones the loop builds, on a scripted model that
loads no model file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runtime.tools import Effect, Tool, ToolContract
from store.events import ProposalRejected, ToolCallExecuted, WorkspaceSurveyed
from tests.helpers import answer, call, events, framing_runtime, options, run, submit

WRITE = ("read", "write")


def path_schema(schema: dict, tool: str) -> dict:
    return options(schema)[f"call_tool:{tool}"]["arguments"]["properties"]["path"]


def test_the_first_request_shows_the_workspace_layout_before_the_request(store, project_workspace, tmp_path) -> None:
    (project_workspace / "docs").mkdir()
    (project_workspace / "docs" / "guide.md").write_text("# Guide\n")
    rt = framing_runtime(store, tmp_path, [call("read_file", path="notes.txt"), answer("March 3", "result:c1")])
    task_id = submit(store, project_workspace, "When is the release?")
    assert run(rt, task_id) == "completed"
    [surveyed] = events(store, task_id, WorkspaceSurveyed)
    assert surveyed.complete
    assert set(surveyed.entries) == {"README.md", "data.csv", "docs/", "docs/guide.md", "notes.txt"}
    first = rt.model.prompts[0].split("<|im_start|>user", 1)[1]
    listing = first.split('<data id="workspace" source="workspace" trust="untrusted">\n', 1)[1].split("\n</data>")[0]
    assert listing.splitlines() == ["README.md", "data.csv", "docs/ (1 file)", "docs/guide.md", "notes.txt"]
    assert first.index('<data id="workspace"') < first.index("<request>"), "listed first, the request nearer the end"
    assert rt.model.prompts[1].count('<data id="workspace"') == 1, "listed once, at the start, not again"


def test_read_file_is_offered_only_the_files_the_task_has_not_read(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(store, tmp_path, [
        call("read_file", path="notes.txt"), call("read_file", path="README.md"), answer("March 3", "result:c1"),
    ])
    # No line of the workspace has the request's words, so no file is read first for a match.
    task_id = submit(store, project_workspace, "When do we ship?")
    assert run(rt, task_id) == "completed"
    first, second, third = (path_schema(s, "read_file") if "call_tool:read_file" in options(s) else None
                            for s in rt.model.schemas)
    assert first["enum"] == ["README.md", "data.csv", "notes.txt"]
    assert second["enum"] == ["README.md", "data.csv"], "notes.txt is in the request already"
    assert third["enum"] == ["data.csv"]


def test_a_guessed_path_is_refused_with_the_paths_there_are(store, project_workspace, tmp_path) -> None:
    """What a model behind an endpoint that ignores the grammar could send."""
    rt = framing_runtime(store, tmp_path, [call("read_file", path="README"), answer("no readme", "workspace")])
    task_id = submit(store, project_workspace, "What does the project say about itself?")
    run(rt, task_id)
    assert events(store, task_id, ToolCallExecuted) == []
    rejected = rt.model.prompts[1].rsplit("<rejected>", 1)[1]
    assert "'README'" in rejected and "README.md, data.csv, notes.txt" in rejected


def test_a_file_the_task_wrote_can_be_read_and_edited(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(store, tmp_path, [
        call("write_file", path="new.txt", content="one\n"),
        call("edit_file", path="new.txt", old="one", new="two"),
        call("read_file", path="new.txt"),
        answer("two", "result:c3"),
    ], )
    task_id = submit(store, project_workspace, "Make new.txt say two.", allowed_effects=WRITE)
    assert run(rt, task_id) == "completed"
    assert "new.txt" in path_schema(rt.model.schemas[1], "edit_file")["enum"]
    assert "new.txt" in path_schema(rt.model.schemas[2], "read_file")["enum"]
    assert (project_workspace / "new.txt").read_text() == "two\n"


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Done(BaseModel):
    done: bool


class Generate(Tool[NoArgs, Done]):
    """A tool with external effects that writes a file the log never names, as a build or a script might."""

    contract = ToolContract(
        name="generate", description="Generate the report files.", input_model=NoArgs, output_model=Done,
        effects=(Effect.EXTERNAL,), idempotent=True, scope="workspace", timeout_s=5,
    )

    def run(self, ctx, args: NoArgs) -> Done:
        (ctx.workspace / "report.txt").write_text("made\n")
        return Done(done=True)


def test_after_a_call_with_external_effects_paths_are_free_again(store, project_workspace, tmp_path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "from tests.runtime.agent.test_workspace_framing import Generate\n"
        "from runtime.agent.profiles import WORKSPACE\n"
        "def register(tools, profiles):\n"
        "    tools.register(Generate())\n"
        "    profiles['gen'] = WORKSPACE.model_copy(update={'name': 'gen', 'tools': (*WORKSPACE.tools, 'generate')})\n"
    )
    rt = framing_runtime(
        store, tmp_path, [call("generate"), call("read_file", path="report.txt"), answer("made", "result:c2")],
        plugins=[plugin],
    )
    task_id = submit(store, project_workspace, "Generate the report and tell me what it says.", profile="gen",
                     allowed_effects=("read", "external"))
    assert run(rt, task_id) == "completed"
    assert "enum" in path_schema(rt.model.schemas[0], "read_file")
    assert path_schema(rt.model.schemas[1], "read_file").get("enum") is None, "report.txt is named nowhere in the log"
    assert [e.status for e in events(store, task_id, ToolCallExecuted)] == ["ok", "ok"]


def test_the_decision_names_the_files_read_and_changed_so_far(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(store, tmp_path, [
        call("read_file", path="notes.txt"),
        call("edit_file", path="notes.txt", old="March 3", new="March 4"),
        answer("Moved.", "result:c2"),
    ])
    task_id = submit(store, project_workspace, "Move the release to March 4.", allowed_effects=WRITE)
    assert run(rt, task_id) == "completed"
    first, second, third = (p.rsplit("<decision>", 1)[1] for p in rt.model.prompts)
    assert "Files read" not in first and "Files changed" not in first
    assert "Files read so far: notes.txt." in second and "Files changed" not in second
    assert "Files changed so far: notes.txt." in third


def test_results_are_lines_with_a_files_content_as_it_is_and_no_hashes(store, project_workspace, tmp_path) -> None:
    (project_workspace / "notes.txt").write_text('Release: "March 3".\nOwner: Ana\n')
    rt = framing_runtime(store, tmp_path, [call("read_file", path="notes.txt"), answer("March 3", "result:c1")])
    task_id = submit(store, project_workspace, "When is the release?")
    run(rt, task_id)
    result = rt.model.prompts[1].split('<data id="result:c1" source="tool:read_file" trust="untrusted">\n', 1)[1]
    result = result.split("\n</data>", 1)[0]
    assert result == 'status: ok\nlines: 2\npath: notes.txt\nsize: 31\ncontent:\nRelease: "March 3".\nOwner: Ana'


def test_the_models_own_replies_are_not_shown_back_to_it(store, project_workspace, tmp_path) -> None:
    """Measured on the default model: shown its last reply, it wrote it again word for word, reason and all."""
    reply = {**call("read_file", path="notes.txt"), "thought": "a distinctive thought xyzzy"}
    rt = framing_runtime(store, tmp_path, [reply, answer("March 3", "result:c1")])
    task_id = submit(store, project_workspace, "When is the release?")
    run(rt, task_id)
    second = rt.model.prompts[1]
    assert "xyzzy" not in second and '"action"' not in second.split("<|im_start|>user", 1)[1]
    assert 'Step 1: you called read_file with {"path": "notes.txt"}; its result is result:c1.' in second
    assert second.count("<|im_start|>") == 3, "system, one user message, the assistant's turn to come"


def test_the_survey_counts_each_folders_files_and_list_files_is_not_offered(store, project_workspace, tmp_path) -> None:
    (project_workspace / "docs").mkdir()
    for name in ("a.md", "b.md"):
        (project_workspace / "docs" / name).write_text("# doc\n")
    rt = framing_runtime(store, tmp_path, [answer("2", "workspace")])
    task_id = submit(store, project_workspace, "How many files are in the docs folder?")
    assert run(rt, task_id) == "completed"
    listing = rt.model.prompts[0].split('<data id="workspace" source="workspace" trust="untrusted">\n', 1)[1]
    assert "docs/ (2 files)\ndocs/a.md\ndocs/b.md" in listing
    assert "call_tool:list_files" not in options(rt.model.schemas[0]), "every folder's entries are shown already"
    assert "<tool>" in rt.model.prompts[0] and '"name":"list_files"' in rt.model.prompts[0], "still in the prefix"


def test_a_request_naming_a_file_is_offered_only_that_file_to_read(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(store, tmp_path, [call("read_file", path="data.csv"), answer("1 row", "result:c1")])
    task_id = submit(store, project_workspace, "How many rows does data.csv have?")
    assert run(rt, task_id) == "completed"
    assert path_schema(rt.model.schemas[0], "read_file")["enum"] == ["data.csv"]
    assert "call_tool:read_file" not in options(rt.model.schemas[1]), "nothing it points at is left unread"
    assert "final_answer" in options(rt.model.schemas[1])


def test_write_file_takes_the_new_files_the_request_names_as_written(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(
        store, tmp_path, [call("write_file", path="../up.txt", content="x"), answer("Refused.", "result:c1")]
    )
    goal = "Create hello.txt, and a copy one folder up as ../up.txt."
    task_id = submit(store, project_workspace, goal, allowed_effects=WRITE)
    assert run(rt, task_id) == "completed"
    assert path_schema(rt.model.schemas[0], "write_file")["enum"] == ["../up.txt", "hello.txt"]
    [executed] = events(store, task_id, ToolCallExecuted)
    assert executed.status != "ok", "the path outside the workspace is the tool's to refuse"
    assert not (tmp_path / "up.txt").exists()


def test_write_file_takes_any_path_when_the_request_names_no_new_file(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(
        store, tmp_path, [call("write_file", path="summary.md", content="x"), answer("Done.", "result:c1")]
    )
    task_id = submit(store, project_workspace, "Write a short summary of the project.", allowed_effects=WRITE)
    assert run(rt, task_id) == "completed"
    assert path_schema(rt.model.schemas[0], "write_file").get("enum") is None


def test_a_file_is_offered_for_a_change_only_once_its_content_was_shown(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(store, tmp_path, [
        call("write_file", path="notes.txt", content="Release: March 4.\n"),  # over a file not read: refused
        call("read_file", path="notes.txt"),
        call("edit_file", path="notes.txt", old="March 3", new="March 4"),
        answer("Moved.", "result:c2"),
    ])
    # Words no line of the workspace has: no matched file is to be read first, every file may be.
    task_id = submit(store, project_workspace, "Postpone the ship day by one.", allowed_effects=WRITE)
    assert run(rt, task_id) == "completed"
    first, retry, second, _ = (options(s) for s in rt.model.schemas)
    assert "call_tool:edit_file" not in first and "call_tool:append_file" not in first, "nothing read yet"
    assert "enum" not in first["call_tool:write_file"]["arguments"]["properties"]["path"], "a new file's name is free"
    [rejected] = events(store, task_id, ProposalRejected)
    assert rejected.error == "notes.txt exists and you have not seen its content: read_file it before you write it over"
    assert "call_tool:write_file" not in retry and "call_tool:read_file" in retry
    assert second["call_tool:edit_file"]["arguments"]["properties"]["path"]["enum"] == ["notes.txt"]
    assert (project_workspace / "notes.txt").read_text() == "Release: March 4.\n"


def test_nothing_is_changed_before_a_file_the_request_points_at_was_read(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(store, tmp_path, [
        call("read_file", path="notes.txt"),
        call("append_file", path="notes.txt", text="Owner: Ana"),
        answer("Added the owner.", "result:c2"),
    ])
    task_id = submit(store, project_workspace, "Add the owner Ana to notes.txt.", allowed_effects=WRITE)
    assert run(rt, task_id) == "completed"
    first, second, _ = (options(s) for s in rt.model.schemas)
    assert set(first) == {"call_tool:read_file", "final_answer"}, "no write, edit or append before the read"
    assert {"call_tool:append_file", "call_tool:edit_file", "call_tool:write_file"} <= set(second)


def test_new_files_the_request_names_are_written_before_other_files_change(store, project_workspace, tmp_path) -> None:
    rt = framing_runtime(store, tmp_path, [
        call("read_file", path="notes.txt"),
        call("write_file", path="next.txt", content="March 3\n"),
        call("edit_file", path="notes.txt", old="March 3", new="(see next.txt)"),
        answer("Moved.", "result:c3"),
    ])
    task_id = submit(
        store, project_workspace, "Move the date in notes.txt into a new file next.txt.", allowed_effects=WRITE
    )
    assert run(rt, task_id) == "completed"
    _, second, third, _ = (options(s) for s in rt.model.schemas)
    assert second["call_tool:write_file"]["arguments"]["properties"]["path"]["enum"] == ["next.txt"]
    assert "call_tool:edit_file" not in second and "call_tool:append_file" not in second
    assert third["call_tool:edit_file"]["arguments"]["properties"]["path"]["enum"] == ["next.txt", "notes.txt"]
    assert (project_workspace / "next.txt").read_text() == "March 3\n"


class FolderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str


class Clean(Tool[FolderArgs, Done]):
    """A plugin's tool that changes a folder that exists: its path is one of the folders there are."""

    contract = ToolContract(
        name="clean", description="Remove the build output in a folder.", input_model=FolderArgs, output_model=Done,
        effects=(Effect.WRITE,), idempotent=True, scope="workspace", timeout_s=5, path_kind="folder",
    )

    def run(self, ctx, args: FolderArgs) -> Done:
        return Done(done=True)


def test_a_tool_that_changes_a_folder_is_offered_the_folders_there_are(store, project_workspace, tmp_path) -> None:
    (project_workspace / "build").mkdir()
    (project_workspace / "build" / "out.o").write_text("x")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "from tests.runtime.agent.test_workspace_framing import Clean\n"
        "from runtime.agent.profiles import WORKSPACE\n"
        "def register(tools, profiles):\n"
        "    tools.register(Clean())\n"
        "    tools_ = (*WORKSPACE.tools, 'clean')\n"
        "    profiles['cleaner'] = WORKSPACE.model_copy(update={'name': 'cleaner', 'tools': tools_})\n"
    )
    rt = framing_runtime(
        store, tmp_path, [call("clean", path="build"), answer("Cleaned.", "result:c1")], plugins=[plugin]
    )
    task_id = submit(store, project_workspace, "Clean up.", profile="cleaner", allowed_effects=WRITE)
    assert run(rt, task_id) == "completed"
    assert path_schema(rt.model.schemas[0], "clean")["enum"] == [".", "build"]

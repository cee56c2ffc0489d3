"""Skills in the agent loop: the catalog a task is pinned to, activation, allowed-tools, and change notices."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import anyio
import pytest

from notifications import queue
from runtime.agent.loop import Runtime, run_task
from runtime.agent.plugins import load
from runtime.agent.profiles import WORKSPACE
from runtime.agent.rerun import rerun_recorded
from runtime.artifacts import ArtifactStore
from runtime.inference.scripted import ScriptedModel
from runtime.skills.tools import register_skill_tools
from runtime.skills.watcher import CatalogWatcher
from store.events import (
    ApprovalGranted,
    ApprovalRequested,
    ModelCalled,
    NotificationEnqueued,
    ProposalRejected,
    SkillActivated,
    SkillActivationFailed,
    SkillCatalogPinned,
    TaskPhaseChanged,
    ToolCallExecuted,
)
from tests.helpers import EVERYTHING, answer, call, events, submit


@pytest.fixture
def notes_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("The release is planned for March 3.\n")
    return ws


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "release-notes", "Writes release notes from a changelog. Use when asked for release notes.",
                body="1. Read CHANGELOG.md.\n2. Group the entries by kind.", allowed_tools="shell")
    write_skill(
        root, "api-triage", "Diagnoses API errors. Use when an API call fails.", body="Check the status page first."
    )
    return root


def write_skill(root: Path, name: str, description: str, *, body: str = "Do the thing.", allowed_tools: str = "",
                files: dict[str, str] | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    extra = f"allowed-tools: {allowed_tools}\n" if allowed_tools else ""
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n")
    for path, text in (files or {}).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


def runtime(store, tmp_path: Path, replies, *, roots=(), budget: int = 1024) -> Runtime:
    loaded = load([])
    register_skill_tools(loaded.tools)
    profile = WORKSPACE.model_copy(update={"name": "skilled", "tools": ("list_files", "read_file", "shell")})
    return Runtime(
        store=store,
        model=ScriptedModel(replies),
        tools=loaded.tools,
        profiles={**loaded.profiles, "skilled": profile},
        artifacts=ArtifactStore(tmp_path / "artifacts"),
        protected=(tmp_path / "data",),
        skill_roots=tuple(roots),
        skills_budget_tokens=budget,
    )


def run(rt: Runtime, task_id: str, **kw) -> str:
    return anyio.run(lambda: run_task(rt, task_id, **kw))


def activate(name: str) -> dict:
    return {"action": "activate_skill", "skill": name, "reason": "test"}


def system_prompt(prompt: str) -> str:
    return prompt.split("<|im_start|>user", 1)[0]


# -- level 1: the catalog --------------------------------------------------------------------------


def test_a_task_keeps_the_catalog_it_started_with_and_the_next_task_sees_the_new_one(
    store, tmp_path, notes_workspace, skills
) -> None:
    rt = runtime(store, tmp_path, [call("read_file", path="notes.txt"), answer("done")], roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled")
    run(rt, task_id, max_decisions=1)
    write_skill(skills, "csv-report", "Summarises CSV files. Use for tabular data.")
    assert run(rt, task_id) == "completed"

    [pinned] = events(store, task_id, SkillCatalogPinned)
    assert [e.name for e in pinned.entries] == ["api-triage", "release-notes"]
    first, second = rt.model.prompts
    assert "- api-triage: Diagnoses API errors." in system_prompt(first)
    assert "csv-report" not in second
    calls = events(store, task_id, ModelCalled)
    assert calls[0].manifest.prefix_sha256 == calls[1].manifest.prefix_sha256
    [catalog_item] = [i for i in calls[0].manifest.items if i.block == "skills"]
    assert (catalog_item.kind, catalog_item.version) == ("skill", pinned.fingerprint[:12])

    rt2 = runtime(store, tmp_path, [answer("done")], roots=[skills])
    next_task = submit(store, notes_workspace, profile="skilled")
    run(rt2, next_task)
    assert "- csv-report: Summarises CSV files." in system_prompt(rt2.model.prompts[0])


def test_a_catalog_over_its_budget_is_shortened_and_the_manifest_says_so(
    store, tmp_path, notes_workspace, skills
) -> None:
    write_skill(skills, "long-winded", "Explains everything at length. " * 30)
    rt = runtime(store, tmp_path, [answer("done")], roots=[skills], budget=90)
    task_id = submit(store, notes_workspace, profile="skilled")
    run(rt, task_id)
    [pinned] = events(store, task_id, SkillCatalogPinned)
    assert any(e.shortened for e in pinned.entries) or pinned.left_out
    [called] = events(store, task_id, ModelCalled)
    noted = {lo.source for lo in called.manifest.left_out if lo.kind == "skill"}
    assert noted == {f"skill:{e.name}" for e in pinned.entries if e.shortened} | {
        f"skill:{n}" for n in pinned.left_out
    }
    assert noted, "the manifest does not say the catalog was cut"


def test_a_task_without_skills_has_no_catalog_and_no_skill_tools(store, tmp_path, notes_workspace) -> None:
    rt = runtime(store, tmp_path, [answer("done")], roots=[tmp_path / "no-skills-here"])
    task_id = submit(store, notes_workspace, profile="skilled")
    run(rt, task_id)
    [called] = events(store, task_id, ModelCalled)
    assert not [i for i in called.manifest.items if i.kind == "skill"]
    assert "read_skill_file" not in rt.model.prompts[0]


# -- level 2: instructions -------------------------------------------------------------------------


def test_activate_skill_records_the_body_and_the_next_request_shows_it_with_its_hash(
    store, tmp_path, notes_workspace, skills
) -> None:
    rt = runtime(store, tmp_path, [activate("release-notes"), answer("done")], roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled")
    assert run(rt, task_id) == "completed"

    [activated] = events(store, task_id, SkillActivated)
    assert activated.body == "1. Read CHANGELOG.md.\n2. Group the entries by kind."
    assert activated.by == "model" and activated.call_index == 1
    assert "Group the entries by kind." not in rt.model.prompts[0]
    assert "Group the entries by kind." in rt.model.prompts[1]
    second = events(store, task_id, ModelCalled)[-1].manifest
    [item] = [i for i in second.items if i.block == "skill:release-notes"]
    assert (item.kind, item.version) == ("skill", activated.content_hash[:12])
    # The body was read when it was asked for; what the log holds stays, whatever the file becomes.
    (skills / "release-notes" / "SKILL.md").write_text("---\nname: release-notes\ndescription: x\n---\nNew text.\n")
    from runtime.agent.loop import _Runner
    from runtime.agent.request import build_request

    runner = _Runner(rt, task_id)
    runner._load()
    request, _, _ = build_request(rt, runner._trusted(), runner.records[:-2], 2, 1, "next_step", store_prompt=False)
    assert "Group the entries by kind." in request.prompt and "New text." not in request.prompt


def test_a_goal_that_starts_with_slash_name_activates_that_skill_before_the_first_request(
    store, tmp_path, notes_workspace, skills
) -> None:
    rt = runtime(store, tmp_path, [answer("done")], roots=[skills])
    task_id = submit(store, notes_workspace, goal="/api-triage the billing API returns 500", profile="skilled")
    run(rt, task_id)
    [activated] = events(store, task_id, SkillActivated)
    assert (activated.name, activated.by, activated.call_index) == ("api-triage", "user", 0)
    assert "Check the status page first." in rt.model.prompts[0]


def test_a_goal_naming_no_installed_skill_activates_nothing(store, tmp_path, notes_workspace, skills) -> None:
    rt = runtime(store, tmp_path, [answer("done")], roots=[skills])
    task_id = submit(store, notes_workspace, goal="/etc/passwd is missing, why?", profile="skilled")
    run(rt, task_id)
    assert events(store, task_id, SkillActivated) == []


def test_activating_an_unknown_or_already_active_skill_is_refused_with_the_reason(
    store, tmp_path, notes_workspace, skills
) -> None:
    replies = [activate("api-triage"), activate("api-triage"), call("read_file", path="notes.txt"),
               activate("nonexistent"),
               answer("done")]
    rt = runtime(store, tmp_path, replies, roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled")
    assert run(rt, task_id) == "completed"
    errors = [r.error for r in events(store, task_id, ProposalRejected)]
    assert "already active" in errors[0]
    # Only the skills not yet taken in are left to activate.
    assert "'nonexistent'" in errors[1] and "the skills are: release-notes" in errors[1]
    assert len(events(store, task_id, SkillActivated)) == 1


def test_a_skill_removed_after_the_task_started_fails_to_activate_and_the_task_hears_why(
    store, tmp_path, notes_workspace, skills
) -> None:
    rt = runtime(store, tmp_path, [call("read_file", path="notes.txt"), activate("api-triage"), answer("done")],
                 roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled")
    run(rt, task_id, max_decisions=1)
    shutil.rmtree(skills / "api-triage")
    assert run(rt, task_id) == "completed"
    [failed] = events(store, task_id, SkillActivationFailed)
    assert failed.name == "api-triage"
    assert "could not be loaded" in rt.model.prompts[-1]


# -- level 3: resources, and allowed-tools ----------------------------------------------------------


def test_an_active_skill_s_file_is_read_through_read_skill_file(store, tmp_path, notes_workspace, skills) -> None:
    write_skill(skills, "api-triage", "Diagnoses API errors.", files={"references/codes.md": "503 means overload."})
    replies = [activate("api-triage"), call("read_skill_file", skill="api-triage", path="references/codes.md"),
               answer("done")]
    rt = runtime(store, tmp_path, replies, roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled")
    assert run(rt, task_id) == "completed"
    [executed] = events(store, task_id, ToolCallExecuted)
    assert executed.status == "ok"
    assert "503 means overload." in rt.model.prompts[-1]


def test_allowed_tools_pre_approve_a_tool_the_task_was_offered(store, tmp_path, notes_workspace, skills) -> None:
    rt = runtime(store, tmp_path, [activate("release-notes"), call("shell", command="echo hi"), answer("ok")],
                 roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled", allowed_effects=EVERYTHING)
    assert run(rt, task_id) == "completed"
    [requested] = events(store, task_id, ApprovalRequested)
    [granted] = events(store, task_id, ApprovalGranted)
    assert (granted.approval_id, granted.by) == (requested.approval_id, "skill:release-notes")
    [executed] = events(store, task_id, ToolCallExecuted)
    assert (executed.tool, executed.status) == ("shell", "ok")
    assert not [e for e in events(store, task_id, TaskPhaseChanged) if e.phase == "awaiting_approval"]


def test_allowed_tools_never_offer_a_tool_the_task_s_policy_left_out(store, tmp_path, notes_workspace, skills) -> None:
    rt = runtime(store, tmp_path, [activate("release-notes"), call("shell", command="echo hi"),
                                          answer("ok")], roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled")  # read-only: shell is not offered
    assert run(rt, task_id) == "completed"
    [rejected] = events(store, task_id, ProposalRejected)
    assert "no tool 'shell'" in rejected.error
    assert events(store, task_id, ToolCallExecuted) == []
    assert events(store, task_id, ApprovalGranted) == []


def test_a_tool_no_active_skill_lists_still_waits_for_a_person(store, tmp_path, notes_workspace, skills) -> None:
    rt = runtime(store, tmp_path, [activate("api-triage"), call("shell", command="echo hi")], roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled", allowed_effects=EVERYTHING)
    assert run(rt, task_id) == "awaiting_approval"
    assert events(store, task_id, ApprovalGranted) == []


# -- catalog changes reach running tasks -----------------------------------------------------------


def test_skills_added_changed_and_removed_on_disk_notify_running_tasks_once_coalesced(
    store, tmp_path, notes_workspace, skills
) -> None:
    rt = runtime(store, tmp_path, [call("read_file", path="notes.txt")], roots=[skills])
    running = submit(store, notes_workspace, profile="skilled")
    run(rt, running, max_decisions=1)
    waiting = submit(store, notes_workspace, profile="skilled")  # not started: it will pin the new catalog

    def texts() -> list[str]:
        with store.reading() as conn:
            return [p.text for p in queue.pending(conn, running)]

    async def main() -> None:
        watcher = CatalogWatcher(store, [skills], debounce_s=0.2)
        async with anyio.create_task_group() as tg:
            await tg.start(watcher.run)
            write_skill(skills, "csv-report", "Summarises CSV files.")
            await wait_for(lambda: watcher.notified == 1)
            (skills / "api-triage" / "SKILL.md").write_text(
                "---\nname: api-triage\ndescription: Diagnoses API errors, now with retries.\n---\nRetry once.\n"
            )
            shutil.rmtree(skills / "release-notes")
            await wait_for(lambda: "removed release-notes" in texts()[-1])
            tg.cancel_scope.cancel()

    anyio.run(main)
    notes = texts()
    assert "added csv-report" in notes[0]
    assert "changed api-triage" in " ".join(notes[1:])
    with store.reading() as conn:
        assert queue.pending(conn, waiting) == []
        pending = queue.pending(conn, running)
    # They share a dedupe key: the next request takes the latest as one notification, the others folded in.
    [admitted] = queue.drain(pending)
    assert admitted.text == notes[-1] and len(admitted.coalesced) == len(notes) - 1


async def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await anyio.sleep(0.05)


def test_a_task_that_used_a_skill_reruns_on_its_recorded_outputs_without_a_difference(
    store, tmp_path, notes_workspace, skills
) -> None:
    write_skill(skills, "api-triage", "Diagnoses API errors.", files={"references/codes.md": "503 means overload."})
    replies = [activate("api-triage"), call("read_skill_file", skill="api-triage", path="references/codes.md"),
               answer("done")]
    rt = runtime(store, tmp_path, replies, roots=[skills])
    task_id = submit(store, notes_workspace, profile="skilled")
    assert run(rt, task_id) == "completed"
    # The folder changes and loses a skill: the task's requests come from its log, not from the folder.
    shutil.rmtree(skills / "release-notes")
    write_skill(skills, "api-triage", "Something else entirely.", body="Other steps.")
    report = rerun_recorded(runtime(store, tmp_path, [], roots=[skills]), task_id)
    assert (report.calls, report.difference) == (3, None)


def test_changes_made_while_agentd_was_down_are_told_at_start_once(store, tmp_path, notes_workspace, skills) -> None:
    rt = runtime(store, tmp_path, [call("read_file", path="notes.txt"), call("read_file", path="notes.txt")],
                 roots=[skills])
    changed_under = submit(store, notes_workspace, profile="skilled")
    run(rt, changed_under, max_decisions=1)
    shutil.rmtree(skills / "release-notes")
    write_skill(skills, "csv-report", "Summarises CSV files.")
    current = submit(store, notes_workspace, profile="skilled")  # pinned after the change: nothing to tell
    run(rt, current, max_decisions=1)

    def start_and_stop() -> int:
        async def main() -> int:
            watcher = CatalogWatcher(store, [skills])
            async with anyio.create_task_group() as tg:
                await tg.start(watcher.run)
                tg.cancel_scope.cancel()
            return watcher.notified

        return anyio.run(main)

    assert start_and_stop() == 1
    with store.reading() as conn:
        [told] = queue.pending(conn, changed_under)
        assert queue.pending(conn, current) == []
    assert "added csv-report" in told.text and "removed release-notes" in told.text
    assert start_and_stop() == 0, "a restart tells a task of the same catalog again"


def test_a_catalog_change_with_no_task_running_is_logged_and_tells_nobody(store, tmp_path, skills) -> None:
    async def main() -> NotificationEnqueued | None:
        watcher = CatalogWatcher(store, [skills])
        async with anyio.create_task_group() as tg:
            await tg.start(watcher.run)
            write_skill(skills, "csv-report", "Summarises CSV files.")
            told = await watcher.check()
            tg.cancel_scope.cancel()
        return told

    assert anyio.run(main) is None
    assert store.last_seq() == 0

"""Retrieval per decision: searched where the query is new, skipped (and said so) where it would repeat."""

from __future__ import annotations

from pathlib import Path

from runtime.agent.profiles import Profile
from runtime.agent.rerun import rerun_recorded
from runtime.inference.scripted import ScriptedModel
from store.events import EvidenceRetrieved, ModelCalled
from tests.helpers import answer, call, events, framing_runtime, run, submit, workspace_of

# Four documents that match the goal alike: a search shows three, and the same search again would bring
# the fourth, which ranked below them.
GUIDES = {
    f"guide-{n}.md": f"---\nid: guide/{n}\n---\n## Release {n}\n\nThe release date and the release owner are in "
    "notes.txt; write them into a new file when asked.\n"
    for n in range(1, 5)
}
SKIPPED = "skipped (no new read result since the previous decision, whose search this one would repeat)"


def guides(tmp_path: Path) -> Path:
    folder = tmp_path / "knowledge"
    folder.mkdir()
    for name, text in GUIDES.items():
        (folder / name).write_text(text)
    return folder


def helpdesk(folder: Path | None, **kw) -> Profile:
    return Profile(name="helpdesk", role="You answer questions about the release.",
                   tools=("read_file", "write_file"), knowledge=folder, **kw)


def manifests(store, task_id: str) -> list:
    return [e.manifest for e in events(store, task_id, ModelCalled)]


# A change is offered only where the request asks for one.
GOAL = "Write the release date and the release owner from notes.txt into a new file answer.txt."


def run_helpdesk(store, tmp_path: Path, profile: Profile, replies: list[dict]) -> tuple:
    ws = workspace_of(tmp_path, {"notes.txt": "The release is planned for March 3. Owner: Ana.\n"})
    rt = framing_runtime(store, tmp_path, replies)
    rt.profiles["helpdesk"] = profile
    task_id = submit(store, ws, GOAL, profile="helpdesk", allowed_effects=("read", "write"))
    assert run(rt, task_id) == "completed"
    return rt, task_id


def test_a_decision_after_a_read_searches_and_one_after_a_write_says_it_skipped(store, tmp_path) -> None:
    folder = guides(tmp_path)
    replies = [
        call("read_file", path="notes.txt"),
        call("write_file", path="answer.txt", content="March 3, Ana\n"),
        answer("March 3; Ana owns it.", "result:c1"),
    ]
    _, task_id = run_helpdesk(store, tmp_path, helpdesk(folder), replies)
    assert [m.retrieval for m in manifests(store, task_id)] == [None, None, SKIPPED]
    # The first two decisions searched (each with a query of its own); the third would have searched
    # with the second's query and shown what ranked below the second's selection.
    assert {e.call_index for e in events(store, task_id, EvidenceRetrieved)} <= {1, 2}
    assert "retrieval" not in manifests(store, task_id)[0].model_dump(mode="json"), "a search is recorded as before"


def test_a_second_decision_with_no_read_result_yet_skips_the_search_the_first_made(store, tmp_path) -> None:
    folder = guides(tmp_path)
    replies = [call("write_file", path="answer.txt", content="March 3, Ana\n"), answer("March 3.")]
    _, task_id = run_helpdesk(store, tmp_path, helpdesk(folder), replies)
    assert [m.retrieval for m in manifests(store, task_id)] == [None, SKIPPED]
    [first] = events(store, task_id, EvidenceRetrieved)
    assert first.call_index == 1 and len(first.items) == 3
    assert [o.reason for o in first.left_out] == ["ranked below the top 3"], "what the skipped search would add"


def test_a_profile_that_reads_no_knowledge_says_so_in_every_manifest(store, tmp_path) -> None:
    replies = [call("read_file", path="notes.txt"), answer("March 3.", "result:c1")]
    _, task_id = run_helpdesk(store, tmp_path, helpdesk(None, knowledge_scopes=()), replies)
    assert [m.retrieval for m in manifests(store, task_id)] == ["skipped (the profile reads no knowledge)"] * 2


def test_a_task_that_skipped_retrieval_replays_to_the_same_requests(store, tmp_path) -> None:
    folder = guides(tmp_path)
    replies = [call("write_file", path="answer.txt", content="March 3, Ana\n"), answer("March 3.")]
    rt, task_id = run_helpdesk(store, tmp_path, helpdesk(folder), replies)
    again = framing_runtime(store, tmp_path, [])
    again.profiles["helpdesk"] = helpdesk(folder)
    again.model = ScriptedModel([])
    report = rerun_recorded(again, task_id)
    assert (report.calls, report.difference) == (2, None)

"""Few-shot examples: added like documents with their policy version, shown only under that version."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.agent.profiles import Profile
from runtime.agent.view import TaskView
from runtime.artifacts import ArtifactStore
from runtime.errors import InvalidCommand
from runtime.knowledge import examples
from runtime.knowledge.base import KnowledgeBase
from store.events import KNOWLEDGE_STREAM, DocumentAdded, EvidenceRetrieved, ModelCalled
from tests.helpers import answer, call, events, framing_runtime, run, submit, workspace_of
from tests.helpers.cli import one_error_line

RUNBOOK = """---
id: runbook/notes
---
## Release notes

The release notes live in notes.txt; the date in them is the release date.
"""


def example(policy_version: str, *, decision: str = "read_file", situation: str = "When is the release?") -> str:
    return (
        f"---\nid: examples/{decision}-{policy_version}\nkind: example\npolicy_version: {policy_version}\n"
        f"decision: {decision}\n---\nUser: {situation}\n\n## Correct\n\n"
        f'{{"action": "call_tool", "tool": "{decision}", "arguments": {{"path": "notes.txt"}}}}\n\n'
        '## Mistake\n\n{"action": "final_answer", "answer": "The release is tomorrow."}\n'
    )


def doc(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


@pytest.fixture
def base(store, data_dir: Path):
    kb = KnowledgeBase(store, ArtifactStore(data_dir / "artifacts"), data_dir / "knowledge.db")
    yield kb
    kb.close()


def helpdesk(folder: Path) -> Profile:
    return Profile(name="helpdesk", role="You answer questions about the release.", tools=("read_file",),
                   knowledge=folder, knowledge_scopes=())


def test_an_example_is_recorded_with_its_policy_version_and_never_found_as_evidence(base, store, tmp_path) -> None:
    [added] = base.add_paths([doc(tmp_path / "ex", "e.md", example("abc123"))], tenants=["*"], scope=None, by="me")
    assert (added.kind, added.chunks) == ("example", 1)
    [rec] = store.read_stream(KNOWLEDGE_STREAM)
    assert isinstance(rec.event, DocumentAdded)
    assert (rec.event.kind, rec.event.policy_version, rec.event.decision) == ("example", "abc123", "read_file")
    assert base.candidates("when is the release", tenant="acme", scopes=["general"]) == []
    [found] = base.examples("when is the release", tenant="acme", scopes=["general"])
    assert found.policy_version == "abc123"
    assert found.text.splitlines()[1:] == [
        'Right: {"action": "call_tool", "tool": "read_file", "arguments": {"path": "notes.txt"}}',
        'Wrong: {"action": "final_answer", "answer": "The release is tomorrow."}',
    ]


def test_a_document_is_recorded_as_before_examples_existed(base, store, tmp_path) -> None:
    base.add_paths([doc(tmp_path / "d", "r.md", RUNBOOK)], tenants=["*"], scope=None, by="me")
    [rec] = store.read_stream(KNOWLEDGE_STREAM)
    assert not {"kind", "policy_version", "decision"} & set(rec.event.model_dump(mode="json"))


def test_only_the_examples_of_the_profiles_policy_version_are_shown_and_the_others_are_listed_with_why(
    store, tmp_path
) -> None:
    folder = tmp_path / "knowledge"
    doc(folder, "runbook.md", RUNBOOK)
    current = helpdesk(folder).version
    doc(folder / "examples", "now.md", example(current))
    doc(folder / "examples", "old.md", example("0ld0ld0ld0ld"))
    doc(folder / "examples", "rotate.md", example(current, decision="rotate_api_key"))
    ws = workspace_of(tmp_path, {"notes.txt": "The release is planned for March 3.\n"})
    rt = framing_runtime(store, tmp_path, [call("read_file", path="notes.txt"), answer("March 3", "result:c1")])
    rt.profiles["helpdesk"] = helpdesk(folder)
    task_id = submit(store, ws, "When is the release?", profile="helpdesk")
    assert run(rt, task_id) == "completed"

    first = events(store, task_id, EvidenceRetrieved)[0]
    shown = [i.cite for i in first.items]
    assert f"example:examples/read_file-{current}@v1" in shown
    why = {o.source: o.reason for o in first.left_out}
    assert why["example:examples/read_file-0ld0ld0ld0ld@v1"] == (
        f"valid for policy version 0ld0ld0ld0ld, not this task's {current}"
    )
    assert why[f"example:examples/rotate_api_key-{current}@v1"] == (
        "illustrates rotate_api_key, which this task is not offered"
    )
    prompt = rt.model.prompts[0]
    assert f'<data id="example:examples/read_file-{current}@v1" source="example"' in prompt
    assert "0ld0ld0ld0ld" not in prompt and "rotate_api_key" not in prompt
    manifest = events(store, task_id, ModelCalled)[0].manifest
    assert f"example:examples/read_file-{current}@v1" in [i.block for i in manifest.items]
    citable = TaskView.of(store.read_stream(task_id)).transcript.citable
    assert not any(c.startswith("example:") for c in citable), "an example shows how to decide; it is no source"


def test_examples_are_two_or_three_short_ones_the_best_match_last(store, tmp_path) -> None:
    # Five examples of the same decision, every one a match: three are shown, within the budget.
    found = [
        examples.Example(
            cite=f"examples/e{n}@v1", doc_id=f"examples/e{n}", version="v1", policy_version="p1", decision=None,
            text=examples.render(f"User: when is the release{' date' * n}?\n\n## Correct\n\nread notes.txt\n"),
            tenants=frozenset("*"), current=True,
        )
        for n in range(5)
    ]
    chosen = examples.select(
        found, query="when is the release date", tenant="acme", policy_version="p1", offered=(), exclude=set(),
        budget=400, limit=3, count=lambda text: len(text.split()), min_utility=0.2, min_share=0.5,
    )
    assert len(chosen.shown) == 3
    assert [why for _, _, why in chosen.left_out] == ["ranked below the top 3"] * 2


def test_bad_example_files_and_an_unknown_kind_stop_the_add_with_one_line_and_exit_2(agentd, tmp_path) -> None:
    good = doc(tmp_path / "ex", "good.md", example("abc123"))
    cases = {
        "without a policy version": (
            [doc(tmp_path / "bad", "nov.md", example("abc123").replace("policy_version: abc123\n", ""))], (),
            "names the policy_version",
        ),
        "an unclosed front matter": (
            [doc(tmp_path / "bad", "open.md", "---\nid: open\nkind: example\n\n## Correct\n\nx\n")], (),
            "never closed",
        ),
        "a front matter line that is no key": (
            [doc(tmp_path / "bad", "line.md", "---\nid: x\npolicy version abc\n---\n## Correct\n\nx\n")], (),
            "front matter line 3",
        ),
        "no correct decision": (
            [doc(tmp_path / "bad", "half.md", example("abc123").replace("## Correct", "## Right"))], (),
            "## Correct and ## Mistake",
        ),
        "an unknown kind": ([good], ("--kind", "recipe"), "kind 'recipe'"),
        "an unknown kind in the front matter": (
            [doc(tmp_path / "bad", "kind.md", example("abc123").replace("kind: example", "kind: recipe"))], (),
            "kind 'recipe'",
        ),
    }
    for name, (paths, flags, needle) in cases.items():
        result = agentd("knowledge", "add", str(good), *map(str, paths), "--tenant", "acme", *flags)
        assert result.returncode == 2, name
        one_error_line(result, needle, code=2)
    assert "examples/" not in agentd("knowledge", "list").stdout, "a bad file stops the whole add"
    assert "(an example)" in agentd("knowledge", "add", str(good), "--tenant", "acme").stdout
    assert "example for abc123" in agentd("knowledge", "list").stdout


def test_a_file_added_with_kind_example_is_an_example_whatever_its_folder(base, tmp_path) -> None:
    [added] = base.add_paths([doc(tmp_path / "d", "e.md", example("abc123").replace("kind: example\n", ""))],
                             tenants=["*"], scope=None, by="me", kind="example")
    assert added.kind == "example"
    with pytest.raises(InvalidCommand, match="names the policy_version"):
        base.add_paths([doc(tmp_path / "d", "r.md", RUNBOOK)], tenants=["*"], scope=None, by="me", kind="example")

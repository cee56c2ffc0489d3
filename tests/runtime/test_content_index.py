"""The workspace's content index (SQLite FTS5, BM25) and the search tool over it: finding a file by what
it says, kept current as files change, and leaving out what it must."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.artifacts import ArtifactStore
from runtime.content import ContentIndex, words
from runtime.tools.contract import ToolContext
from runtime.tools.executor import execute
from runtime.tools.finder import Search

PROJECT = {
    "README.md": "# birdlog\n\nBirdlog keeps the team's sightings in plain files.\n",
    "docs/operations.md": "# Operations\n\nThe nightly backups go to Bluefin Hosting, kept for 30 days.\n"
                          "Ask Sanne before changing the schedule.\n",
    "docs/guide.md": "# Guide\n\nRun `birdlog list` to see the sightings of the day.\n",
    "notes/2026-03-01.md": "# Meeting\n\n- Review the backup plan.\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for name, text in PROJECT.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text)
    return ws


def index_of(ws: Path, tmp_path: Path, protected: tuple[Path, ...] = ()) -> ContentIndex:
    return ContentIndex(ws, tmp_path / "data" / "content", protected)


def test_a_file_is_found_by_what_it_says_not_by_its_name(project: Path, tmp_path: Path) -> None:
    found = index_of(project, tmp_path).find("Which file says where the nightly backups go?")
    assert (found[0].path, found[0].line) == ("docs/operations.md", 3)
    assert found[0].before is None and found[0].after == "Ask Sanne before changing the schedule."


def test_rare_words_outrank_common_ones(project: Path, tmp_path: Path) -> None:
    # "sightings" is in two files, "Bluefin" in one: the line with the rare word comes first.
    found = index_of(project, tmp_path).find("sightings Bluefin")
    assert found[0].path == "docs/operations.md"
    assert {f.path for f in found} == {"docs/operations.md", "README.md", "docs/guide.md"}


def test_the_question_words_are_not_what_is_looked_for() -> None:
    assert words("Which file mentions Corvid Cloud? Tell me where it is written.") == ["corvid", "cloud"]
    assert words("What is timeout_seconds in config/settings.yaml?") == ["timeout_seconds", "config", "settings.yaml"]
    assert words("Where is it?") == []


def test_the_index_follows_changes_and_reads_only_files_that_changed(project: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    index = index_of(project, tmp_path)
    assert index.refresh() == 4
    read: list[Path] = []
    original = ContentIndex._text
    monkeypatch.setattr(ContentIndex, "_text", staticmethod(lambda p: read.append(p) or original(p)))
    target = project / "docs" / "operations.md"
    target.write_text("# Operations\n\nThe nightly backups go to Corvid Cloud now.\n")
    os.utime(target, ns=(1, 1))  # a new mtime even on a coarse clock
    (project / "notes" / "2026-03-01.md").unlink()
    found = index.find("backups Corvid Bluefin")
    assert read == [target]
    assert [(f.path, f.text) for f in found] == [("docs/operations.md", "The nightly backups go to Corvid Cloud now.")]


def test_agentds_data_hidden_folders_binaries_links_and_large_files_are_left_out(project: Path,
                                                                               tmp_path: Path) -> None:
    secret = "zebra-password"
    (project / ".agentd").mkdir()
    (project / ".agentd" / "agentd.log").write_text(f"{secret}\n")
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text(f"{secret}\n")
    (project / "image.bin").write_bytes(b"\x00\x01" + secret.encode())
    (tmp_path / "outside.txt").write_text(f"{secret}\n")
    (project / "link.txt").symlink_to(tmp_path / "outside.txt")
    (project / "huge.txt").write_text(f"{secret}\n" + "x" * (1024 * 1024))
    index = index_of(project, tmp_path, protected=(project / ".agentd",))
    assert index.find(secret) == []
    assert index.skipped == 1
    assert not any(p.suffix == ".db" for p in project.rglob("*")), "the index is not kept in the workspace"


def test_the_search_tool_returns_lines_with_paths_and_context(project: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    ctx = ToolContext(task_id="t-1", tenant="default", actor="tester", workspace=project,
                      artifacts=ArtifactStore(data / "artifacts"), protected=(data,))
    outcome = execute(Search(), ctx, {"query": "nightly backups"})
    assert outcome.ok, outcome.observation
    first = outcome.observation["matches"][0]
    assert (first["path"], first["line"]) == ("docs/operations.md", 3)
    assert outcome.observation["files_indexed"] == 4
    assert (data / "content").is_dir()
    empty = execute(Search(), ctx, {"query": ""})
    assert empty.status == "invalid_arguments"
    nothing = execute(Search(), ctx, {"query": "where is it"})
    assert nothing.ok and nothing.observation["matches"] == []

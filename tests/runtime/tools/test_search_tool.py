"""search_files: lines that contain a text, found and counted by code, inside the workspace only."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.artifacts import ArtifactStore
from runtime.tools import ToolContext, builtin_registry, execute
from runtime.tools.search import MAX_MATCHES, SearchFiles

LOG = """2026-11-30 09:00:01 INFO started
2026-11-30 09:00:05 ERROR could not reach db.internal
2026-11-30 09:01:10 INFO retrying
2026-11-30 09:01:15 error could not reach db.internal
2026-11-30 09:03:30 ERROR gave up after 3 tries
"""


@pytest.fixture
def log_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "logs").mkdir(parents=True)
    (ws / "logs" / "app.log").write_text(LOG)
    (ws / "notes.txt").write_text("no errors here\n")
    (ws / "logo.png").write_bytes(b"\x89PNG\x00\x00error")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("error in a hidden folder\n")
    (ws / ".agentd").mkdir()
    (ws / ".agentd" / "agentd.log").write_text("error in agentd's own log\n")
    return ws


@pytest.fixture
def ctx(tmp_path: Path, log_workspace: Path) -> ToolContext:
    data = log_workspace / ".agentd"
    return ToolContext("t", "acme", "agent", log_workspace, ArtifactStore(tmp_path / "artifacts"), protected=(data,))


def search(ctx: ToolContext, **args):
    return execute(SearchFiles(), ctx, args)


def test_a_file_s_matching_lines_are_counted_without_regard_to_case(ctx) -> None:
    out = search(ctx, text="ERROR", path="logs/app.log")
    assert out.status == "ok"
    assert out.observation["count"] == 3 and out.observation["files_searched"] == 1
    assert [(m["path"], m["line"]) for m in out.observation["matches"]] == [
        ("logs/app.log", 2), ("logs/app.log", 4), ("logs/app.log", 5)
    ]
    assert out.observation["matches"][2]["text"] == "2026-11-30 09:03:30 ERROR gave up after 3 tries"


def test_a_folder_is_searched_through_its_text_files_only(ctx) -> None:
    out = search(ctx, text="error")
    # The log and notes.txt; not the binary file, the hidden folder or agentd's own data.
    assert {m["path"] for m in out.observation["matches"]} == {"logs/app.log", "notes.txt"}
    assert out.observation["count"] == 4 and out.observation["files_searched"] == 2


def test_matches_past_the_limit_are_counted_and_said_to_be_left_out(ctx, log_workspace) -> None:
    (log_workspace / "big.txt").write_text("hit\n" * (MAX_MATCHES + 7))
    out = search(ctx, text="hit", path="big.txt")
    assert len(out.output.matches) == MAX_MATCHES and out.output.omitted == 7
    # Too long to show whole, the result still says how many lines match; the lines are an artifact.
    assert out.observation["truncated"] is True and "matches" not in out.observation
    assert (out.observation["count"], out.observation["omitted"]) == (MAX_MATCHES + 7, 7)


@pytest.mark.parametrize(("args", "status", "error"), [
    ({"text": "x", "path": "../outside.txt"}, "refused", "outside_workspace"),
    ({"text": "x", "path": "/etc/passwd"}, "refused", "outside_workspace"),
    ({"text": "x", "path": ".agentd/agentd.log"}, "refused", "protected_path"),
    ({"text": "x", "path": "missing.txt"}, "error", "not_found"),
    ({"text": "x", "path": "logo.png"}, "error", "binary_file"),
    ({"text": "", "path": "notes.txt"}, "invalid_arguments", None),
    ({"path": "notes.txt"}, "invalid_arguments", None),
])
def test_bad_searches_fail_with_a_clear_code_and_read_nothing(ctx, args, status, error) -> None:
    out = search(ctx, **args)
    assert out.status == status
    if error is not None:
        assert out.observation["error"] == error
    assert "matches" not in out.observation


def test_search_files_is_a_built_in_read_only_tool() -> None:
    contract = builtin_registry().get("search_files").contract
    assert [e.value for e in contract.effects] == ["read"] and contract.idempotent

"""Export and import as JSON Lines: export, import into an empty store, export again gives the same bytes.

What a file cut short, changed or breaking the fold's rules does is in
tests/store/test_log_evidence.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store import EventStore, StoreError
from store.events import (
    ArtifactWritten,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
)


def fill(store: EventStore) -> None:
    store.append("t-1", [TaskSubmitted(goal="résumé ✓ « quotes » \"and\" \\ backslash", workspace="/w")])
    store.append("t-2", [TaskSubmitted(goal="second", workspace="/w")], actor="ann", correlation_id="corr-1")
    store.append(
        "t-1",
        [
            TaskPhaseChanged(phase=TaskPhase.RUNNING),
            ToolCallProposed(call_id="c1", tool="read_file", arguments={"path": "ü/file.txt"}),
            ToolCallExecuted(
                call_id="c1",
                tool="read_file",
                status="ok",
                observation={"ratio": 0.1, "big": 1e16, "tiny": 5e-324, "nested": {"list": [1, "two", None]}},
            ),
            ArtifactWritten(path="ü/file.txt", sha256="c" * 64, size=3),
        ],
        causation_id="cause-1",
    )
    store.append("t-3", [TaskSubmitted(goal="x", workspace="/w")])


def test_export_import_export_is_byte_identical(agentd, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with EventStore(f"sqlite:///{tmp_path / 'a' / 'agentd.db'}") as store:
        fill(store)
    first = agentd("--data-dir", str(tmp_path / "a"), "events", "export", "-o", str(tmp_path / "one.jsonl"))
    assert first.returncode == 0, first.stderr
    second = agentd("--data-dir", str(tmp_path / "b"), "events", "import", str(tmp_path / "one.jsonl"))
    assert second.returncode == 0, second.stderr
    assert "imported 7 events" in second.stdout
    third = agentd("--data-dir", str(tmp_path / "b"), "events", "export")
    assert third.returncode == 0, third.stderr
    exported = (tmp_path / "one.jsonl").read_text(encoding="utf-8")
    assert third.stdout == exported
    # Seven events, then the trailer.
    assert len(exported.splitlines()) == 8
    assert json.loads(exported.splitlines()[0])["payload"]["goal"].startswith("résumé ✓")
    assert json.loads(exported.splitlines()[-1])["trailer"]["count"] == 7


def test_imported_store_has_the_same_projections(agentd, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with EventStore(f"sqlite:///{tmp_path / 'a' / 'agentd.db'}") as store:
        fill(store)
        original = store.task("t-1")
    agentd("--data-dir", str(tmp_path / "a"), "events", "export", "-o", str(tmp_path / "x.jsonl"))
    agentd("--data-dir", str(tmp_path / "b"), "events", "import", str(tmp_path / "x.jsonl"))
    with EventStore(f"sqlite:///{tmp_path / 'b' / 'agentd.db'}") as store:
        assert store.task("t-1") == original
    replay = agentd("--data-dir", str(tmp_path / "b"), "replay")
    assert replay.returncode == 0 and "match" in replay.stdout


def test_import_reads_standard_input(agentd, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with EventStore(f"sqlite:///{tmp_path / 'a' / 'agentd.db'}") as store:
        fill(store)
    exported = agentd("--data-dir", str(tmp_path / "a"), "events", "export").stdout
    result = agentd("--data-dir", str(tmp_path / "b"), "events", "import", "-", input=exported)
    assert result.returncode == 0, result.stderr
    assert agentd("--data-dir", str(tmp_path / "b"), "events", "export").stdout == exported


def test_import_is_all_or_nothing(db_url: str) -> None:
    from store.archive import chained, import_into

    good = (
        '{"seq":1,"stream_id":"t-1","stream_version":1,"type":"TaskSubmitted","schema_version":1,'
        '"recorded_at":"2026-01-01T00:00:00.000000Z","actor":"a","causation_id":null,"correlation_id":null,'
        '"payload":{"goal":"g","workspace":"/w"}}'
    )
    bad = (
        good.replace('"seq":1', '"seq":2')
        .replace('"stream_version":1', '"stream_version":2')
        .replace('"TaskSubmitted"', '"TaskPhaseChanged"')
        .replace('{"goal":"g","workspace":"/w"}', '{"phase":"x"}')
    )
    with EventStore(db_url) as store:
        with pytest.raises(StoreError, match="line 2: event 2 \\(TaskPhaseChanged\\) has an invalid payload"):
            store.in_write_transaction(lambda conn: import_into(conn, chained([good, bad])))
        assert store.last_seq() == 0
        assert store.tasks() == []

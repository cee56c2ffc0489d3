"""SQLite's integrity check as agentd reports it: one line from `db check`, and the same line from `serve`,
which refuses a damaged database before it writes anything."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from tests.helpers import one_error_line, serve_refused


def damaged_index(agentd, data: Path) -> None:
    """A data directory whose tasks index has its cell pointers overwritten: the log and the tables read
    as before, and SQLite's integrity check reports several problems, the first over several lines."""
    env = {"AGENTD_DATA_DIR": str(data)}
    for n in range(12):
        assert agentd("task", "submit", f"task {n}", env=env).returncode == 0
    db = data / "agentd.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks' AND sql IS NOT NULL "
            "ORDER BY rootpage DESC LIMIT 1"
        ).fetchone()[0]
    with db.open("r+b") as f:
        f.seek((root - 1) * page_size + 8)  # past a leaf page's header: its first cell pointers
        f.write(b"\x7f\x7f\x7f")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        report = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    assert len(report) > 1 and "\n" in report[0], f"the damage is not the kind this test is about: {report}"


def events_in(data: Path) -> int:
    with contextlib.closing(sqlite3.connect(data / "agentd.db")) as conn:
        return conn.execute("SELECT count(*) FROM events").fetchone()[0]


def test_db_check_reports_a_failed_integrity_check_in_one_line(agentd, tmp_path: Path) -> None:
    data = tmp_path / "data"
    damaged_index(agentd, data)
    line = one_error_line(agentd("--data-dir", str(data), "db", "check"), "is corrupt", "integrity check")
    assert str(data / "agentd.db") in line and "***" not in line, line
    assert "3 problems, the first: On tree page" in line, line


def test_serve_refuses_a_database_that_fails_its_integrity_check_in_the_line_db_check_gives(agentd, tmp_path):
    data = tmp_path / "data"
    damaged_index(agentd, data)
    checked = one_error_line(agentd("--data-dir", str(data), "db", "check"))
    before = events_in(data)
    refused = serve_refused(data, "a database that fails its integrity check")
    out = refused.stdout
    assert one_error_line(refused) == checked
    assert "web page" not in out
    assert events_in(data) == before

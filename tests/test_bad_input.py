"""Bad input: each gives one clear line on stderr and a non-zero exit, and leaves what was committed intact.

Every case runs the real `agentd` command in a subprocess against a data directory under tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from store import ConcurrencyConflict, EventStore
from store.archive import chained
from store.events import ModelCalled, TaskPhase, TaskPhaseChanged, TaskSubmitted
from tests.helpers import REPO, free_port

# -- helpers --------------------------------------------------------------------------------------


def one_error_line(result: subprocess.CompletedProcess, *names: object) -> str:
    """The command failed with exactly one `agentd: ...` line on stderr that names every one of `names`."""
    shown = f"exit {result.returncode}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.returncode != 0, shown
    assert "Traceback" not in result.stderr, shown
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}\n{shown}"
    line = lines[0]
    assert line.startswith("agentd: ") and line[len("agentd: "):].strip(), shown
    for name in names:
        assert str(name) in line, f"the error line does not name {name!r}: {line!r}"
    return line


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    return result.stdout


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def seed_tasks(db_url: str, workspace: Path, n: int, *, pad: int = 0) -> list[str]:
    """Commit `n` submitted tasks through the store's own API; return their ids."""
    ids = [f"t-seed{i:04d}" for i in range(n)]
    with EventStore(db_url) as store:
        for i, task_id in enumerate(ids):
            goal = f"seeded task {i} " + "g" * pad
            store.append(task_id, [TaskSubmitted(goal=goal, workspace=str(workspace))], expected_version=0)
    return ids


def listed_task_ids(agentd, data_dir: Path) -> list[str]:
    return [t["task_id"] for t in json.loads(ok(agentd("--data-dir", str(data_dir), "task", "list", "--json")))]


def event_count(db_path: Path) -> int:
    with sqlite3.connect(db_path) as conn:
        return conn.execute("SELECT count(*) FROM events").fetchone()[0]


def insert_raw_event(db_path: Path, stream_id: str, type_name: str, payload: str) -> int:
    """Write a row behind agentd's back, at the right next seq and stream version; return its seq."""
    conn = sqlite3.connect(db_path)
    try:
        with conn:
            seq = conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM events").fetchone()[0]
            version = conn.execute(
                "SELECT coalesce(max(stream_version), 0) + 1 FROM events WHERE stream_id = ?", (stream_id,)
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, 1, ?, '2026-11-29T12:00:00.000000Z', 'test', NULL, NULL, NULL)",
                (seq, stream_id, version, type_name, payload),
            )
    finally:
        conn.close()
    return seq


def export_line(seq: int, stream_id: str, version: int, type_name: str, payload: dict) -> str:
    return json.dumps(
        {
            "seq": seq,
            "stream_id": stream_id,
            "stream_version": version,
            "type": type_name,
            "schema_version": 1,
            "recorded_at": "2026-11-29T12:00:00.000000Z",
            "actor": "test",
            "causation_id": None,
            "correlation_id": None,
            "payload": payload,
        }
    )


def submitted(goal: str) -> dict:
    return {"goal": goal, "workspace": "/w"}


def agentd_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "runtime.cli", *args]


# -- 1, 2: a damaged database file ---------------------------------------------------------------


def garble_table_roots(db_path: Path, tables: tuple[str, ...], seed: int) -> None:
    """Overwrite the root page of each table with random bytes, leaving the header and schema pages alone."""
    with sqlite3.connect(db_path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        roots = [
            conn.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", (t,)).fetchone()[0]
            for t in tables
        ]
    conn.close()
    rng = random.Random(seed)
    with open(db_path, "r+b") as f:
        for page in roots:
            assert page > 1
            f.seek((page - 1) * page_size)
            f.write(rng.randbytes(page_size))


@pytest.fixture
def corrupted_db(db_url: str, data_dir: Path, tmp_path: Path) -> Path:
    """A database holding 40 tasks whose `events` and `tasks` tables have garbage in the middle of the file."""
    seed_tasks(db_url, tmp_path, 40, pad=400)
    db = data_dir / "agentd.db"
    assert not (data_dir / "agentd.db-wal").exists() or (data_dir / "agentd.db-wal").stat().st_size == 0
    garble_table_roots(db, ("events", "tasks"), seed=1)
    return db


def test_corrupted_database_fails_listing_with_one_line_and_is_left_untouched(agentd, data_dir, corrupted_db):
    before = digest(corrupted_db)
    for command in (("task", "list"), ("events", "list")):
        line = one_error_line(agentd("--data-dir", str(data_dir), *command), corrupted_db)
        assert "corrupt" in line or "not a database" in line, line
    assert digest(corrupted_db) == before


def test_replay_of_a_corrupted_database_names_the_live_database_not_its_scratch_copy(agentd, data_dir, corrupted_db):
    before = digest(corrupted_db)
    line = one_error_line(agentd("--data-dir", str(data_dir), "replay"), corrupted_db)
    assert "corrupt" in line, line
    assert "replay-" not in line and "rebuilt.db" not in line, f"blames the scratch database: {line}"
    assert digest(corrupted_db) == before


def test_random_bytes_as_the_database_fail_with_one_line_and_are_left_untouched(agentd, data_dir):
    data_dir.mkdir()
    db = data_dir / "agentd.db"
    db.write_bytes(random.Random(2).randbytes(20_000))
    before = digest(db)
    for command in (("task", "list"), ("events", "list")):
        line = one_error_line(agentd("--data-dir", str(data_dir), *command), db)
        assert "not a database" in line, line
    assert digest(db) == before


def test_truncated_database_fails_with_one_line_and_is_left_untouched(agentd, data_dir, db_url, tmp_path):
    seed_tasks(db_url, tmp_path, 40, pad=400)
    # One more task through the CLI, which closes the store cleanly: the WAL is checkpointed into the file.
    ok(agentd("--data-dir", str(data_dir), "task", "submit", "the last one"))
    db = data_dir / "agentd.db"
    wal = data_dir / "agentd.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0, "the WAL was not checkpointed into the database file"
    size = db.stat().st_size
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    assert size >= 8 * page_size, f"only {size // page_size} pages"
    os.truncate(db, size // 2)
    before = digest(db)
    for command in (("task", "list"), ("events", "list")):
        line = one_error_line(agentd("--data-dir", str(data_dir), *command), db)
        assert "corrupt" in line or "not a database" in line, line
    assert digest(db) == before


# -- 3, 4: events the code cannot read ------------------------------------------------------------


def test_unknown_event_type_in_the_log_makes_replay_name_its_seq_and_type(agentd, data_dir, db_url, tmp_path):
    [task_id] = seed_tasks(db_url, tmp_path, 1)
    seq = insert_raw_event(data_dir / "agentd.db", task_id, "FutureThing", '{"what": "a newer agentd wrote this"}')
    assert seq == 2
    dd = ("--data-dir", str(data_dir))

    one_error_line(agentd(*dd, "replay"), "event 2", "FutureThing")
    # Folding the task from the log up to that event meets it too.
    one_error_line(agentd(*dd, "task", "show", task_id, "--at", "2"), "event 2", "FutureThing")
    # The projection, written before the row arrived, still shows the task as committed.
    shown = json.loads(ok(agentd(*dd, "task", "show", task_id, "--json")))
    assert shown["summary"]["task_id"] == task_id and shown["summary"]["version"] == 1
    # The raw log stays readable: the row is listed as stored.
    raw = [json.loads(line) for line in ok(agentd(*dd, "events", "list", "--json")).splitlines()]
    assert [(r["seq"], r["type"]) for r in raw] == [(1, "TaskSubmitted"), (2, "FutureThing")]


def test_invalid_payload_in_the_log_makes_replay_name_its_seq(agentd, data_dir, db_url, tmp_path):
    [task_id] = seed_tasks(db_url, tmp_path, 1)
    seq = insert_raw_event(data_dir / "agentd.db", task_id, "TaskPhaseChanged", '{"phase": "sideways"}')
    line = one_error_line(agentd("--data-dir", str(data_dir), "replay"), f"event {seq}", "TaskPhaseChanged")
    assert "phase" in line and "invalid payload" in line, line
    assert event_count(data_dir / "agentd.db") == 2


def test_import_with_an_invalid_payload_on_line_2_names_the_line_and_imports_nothing(agentd, data_dir, tmp_path):
    source = tmp_path / "export.jsonl"
    source.write_text(
        "\n".join(
            chained([
                export_line(1, "t-a", 1, "TaskSubmitted", submitted("fine")),
                export_line(
                    2, "t-a", 2, "ModelCalled",
                    {"call_index": 0, "model": "m", "prompt_tokens": 1, "completion_tokens": 1},
                ),
                export_line(3, "t-b", 1, "TaskSubmitted", submitted("never reached")),
            ])
        )
        + "\n",
        encoding="utf-8",
    )
    line = one_error_line(agentd("--data-dir", str(data_dir), "events", "import", str(source)), "line 2")
    assert "call_index" in line, line
    assert event_count(data_dir / "agentd.db") == 0, "a failed import left events behind"
    assert listed_task_ids(agentd, data_dir) == []


# -- 5: expected-version conflicts ----------------------------------------------------------------


def test_append_with_a_stale_expected_version_raises_conflict_and_writes_nothing(db_url):
    with EventStore(db_url) as store:
        store.append("t-x", [TaskSubmitted(goal="g", workspace="/w")], expected_version=0)
        store.append(
            "t-x", [ModelCalled(call_index=1, model="m", prompt_tokens=1, completion_tokens=1)], expected_version=1
        )
        before = store.read_stream("t-x")
        with pytest.raises(ConcurrencyConflict) as raised:
            store.append(
                "t-x",
                [TaskPhaseChanged(phase=TaskPhase.CANCELLED), TaskPhaseChanged(phase=TaskPhase.RUNNING)],
                expected_version=1,
            )
        assert (raised.value.stream_id, raised.value.expected, raised.value.actual) == ("t-x", 1, 2)
        assert "'t-x'" in str(raised.value) and "nothing was written" in str(raised.value)
        assert store.stream_version("t-x") == 2
        assert store.last_seq() == 2
        assert store.read_stream("t-x") == before
        assert store.task("t-x").summary.version == 2 and store.task("t-x").phase == TaskPhase.SUBMITTED
        # A new stream that must not exist yet, but does.
        with pytest.raises(ConcurrencyConflict):
            store.append("t-x", [TaskSubmitted(goal="again", workspace="/w")], expected_version=0)
        assert store.last_seq() == 2


def test_a_conflicting_request_in_a_group_commit_fails_alone(db_url):
    with EventStore(db_url) as store:
        for s in ("t-a", "t-b", "t-c"):
            store.append(s, [TaskSubmitted(goal=s, workspace="/w")], expected_version=0)
        call = ModelCalled(call_index=1, model="m", prompt_tokens=1, completion_tokens=1)
        # Queued together, so the writer may commit them in one transaction.
        futures = [store.submit(s, [call, call], expected_version=v) for s, v in (("t-a", 1), ("t-b", 0), ("t-c", 1))]
        good_a = futures[0].result()
        with pytest.raises(ConcurrencyConflict):
            futures[1].result()
        good_c = futures[2].result()
        assert sorted(r.seq for r in good_a + good_c) == [4, 5, 6, 7]
        assert store.last_seq() == 7
        assert store.stream_version("t-b") == 1
        assert [store.stream_version("t-a"), store.stream_version("t-c")] == [3, 3]


def test_racing_cancels_of_one_task_let_exactly_one_win_and_the_others_fail_with_one_line(
    agentd, data_dir, db_url, tmp_path
):
    [task_id] = seed_tasks(db_url, tmp_path, 1)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: agentd("--data-dir", str(data_dir), "task", "cancel", task_id), range(4)))
    winners = [r for r in results if r.returncode == 0]
    assert len(winners) == 1, [(r.returncode, r.stderr) for r in results]
    assert winners[0].stdout.strip() == f"{task_id} cancelled"
    for loser in (r for r in results if r.returncode != 0):
        line = one_error_line(loser, task_id)
        assert "already cancelled" in line or "nothing was written" in line, line
    raw = [
        json.loads(line) for line in ok(agentd("--data-dir", str(data_dir), "events", "list", "--json")).splitlines()
    ]
    assert [(r["type"], r["stream_version"]) for r in raw] == [("TaskSubmitted", 1), ("TaskPhaseChanged", 2)]


# -- 6: a database locked by another process ------------------------------------------------------


@pytest.fixture
def write_lock_holder(data_dir: Path):
    """Another process's write transaction on the database, with an uncommitted insert, held open."""

    def hold() -> sqlite3.Connection:
        conn = sqlite3.connect(data_dir / "agentd.db", isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO alembic_version VALUES ('held-by-the-test')")
        return conn

    held: list[sqlite3.Connection] = []

    def start() -> sqlite3.Connection:
        held.append(hold())
        return held[-1]

    yield start
    for conn in held:
        conn.close()


def test_submit_while_another_process_holds_the_write_lock_fails_with_one_line(
    agentd, data_dir, db_url, tmp_path, write_lock_holder
):
    ids = seed_tasks(db_url, tmp_path, 3)
    db = data_dir / "agentd.db"
    holder = write_lock_holder()
    started = time.monotonic()
    result = agentd("--data-dir", str(data_dir), "task", "submit", "x", env={"AGENTD_BUSY_TIMEOUT_MS": "300"})
    elapsed = time.monotonic() - started
    line = one_error_line(result, db)
    assert "locked" in line, line
    assert elapsed < 20, f"gave up after {elapsed:.1f} s with a 300 ms busy timeout"
    holder.execute("ROLLBACK")
    holder.close()

    assert listed_task_ids(agentd, data_dir) == ids
    new_id = ok(agentd("--data-dir", str(data_dir), "task", "submit", "after the lock")).strip()
    assert listed_task_ids(agentd, data_dir) == [*ids, new_id]
    assert event_count(db) == 4


def test_task_list_reads_while_another_process_holds_the_write_lock(
    agentd, data_dir, db_url, tmp_path, write_lock_holder
):
    """WAL readers never wait for the writer: listing must not need the write lock."""
    ids = seed_tasks(db_url, tmp_path, 2)
    write_lock_holder()
    result = agentd("--data-dir", str(data_dir), "task", "list", "--json", env={"AGENTD_BUSY_TIMEOUT_MS": "300"})
    assert [t["task_id"] for t in json.loads(ok(result))] == ids


# -- 7: a second agentd on the same data directory ------------------------------------------------


HOLD_INSTANCE_LOCK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from runtime.daemon.lock import InstanceLock

    with InstanceLock(Path(sys.argv[1])):
        print("held", flush=True)
        sys.stdin.read()
    """
)


def test_serve_refuses_a_data_dir_whose_instance_lock_another_process_holds(agentd, data_dir, tmp_path):
    script = tmp_path / "hold_lock.py"
    script.write_text(HOLD_INSTANCE_LOCK, encoding="utf-8")
    holder = subprocess.Popen(
        [sys.executable, str(script), str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        result = agentd("--data-dir", str(data_dir), "serve", "--port", str(free_port()), timeout=30)
        assert time.monotonic() - started < 15
        line = one_error_line(result, f"pid {holder.pid}", data_dir)
        assert "already serving" in line, line
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
    assert holder.returncode == 0


@pytest.mark.slow
def test_second_serve_names_the_first_ones_pid_and_the_first_stops_cleanly_on_sigterm(agentd, data_dir, tmp_path):
    port = free_port()
    first = subprocess.Popen(
        agentd_cmd("--data-dir", str(data_dir), "serve", "--model", "smollm2-135m", "--port", str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        health = None
        while health is None:
            if first.poll() is not None:
                _, err = first.communicate()
                last = err.strip().splitlines()[-1:] or [""]
                pytest.fail(f"the first agentd serve exited with {first.returncode} before serving: {last[0]}")
            assert time.monotonic() < deadline, "the first agentd serve did not answer /healthz within 60 s"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                    health = json.loads(response.read())
            except OSError:
                time.sleep(0.1)
        assert health["status"] == "ok"

        started = time.monotonic()
        second = agentd("--data-dir", str(data_dir), "serve", "--port", str(free_port()), timeout=30)
        assert time.monotonic() - started < 15, "the second agentd serve did not give up quickly"
        line = one_error_line(second, f"pid {first.pid}")
        assert "already serving" in line, line

        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=30)
        assert first.returncode == 0, (
            f"agentd serve exited with {first.returncode} on SIGTERM; stderr ends: {err[-500:]!r}"
        )
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


# -- 8: the model file ----------------------------------------------------------------------------


def test_serve_with_a_missing_model_file_names_the_path(agentd, data_dir):
    missing = "/nonexistent/x.gguf"
    line = one_error_line(
        agentd("--data-dir", str(data_dir), "serve", "--model", missing, "--port", str(free_port())), missing
    )
    assert "does not exist" in line, line


def test_model_path_with_a_missing_model_file_names_the_path(agentd, data_dir, tmp_path):
    missing = tmp_path / "missing.gguf"
    line = one_error_line(agentd("--data-dir", str(data_dir), "model", "path", "--model", str(missing)), missing)
    assert "does not exist" in line, line


def test_model_file_that_is_not_gguf_is_called_so(agentd, data_dir, tmp_path):
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"PK\x03\x04 this is a zip file, not a model" + bytes(200))
    line = one_error_line(agentd("--data-dir", str(data_dir), "model", "path", "--model", str(fake)), fake)
    assert "not a GGUF file" in line, line


def test_unreadable_model_path_names_the_path(agentd, data_dir, tmp_path):
    """A path through a regular file cannot be opened by anyone, root included (chmod 000 stops no root)."""
    blocker = tmp_path / "models"
    blocker.write_bytes(b"not a folder")
    unreadable = blocker / "model.gguf"
    line = one_error_line(agentd("--data-dir", str(data_dir), "model", "path", "--model", str(unreadable)), unreadable)
    assert "cannot be read" in line, line


# -- 9: settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "env", "names"),
    [
        ('port = "abc"\n', {}, ("invalid value for port", "agentd.toml")),
        ('sqlite_synchronous = "sometimes"\n', {}, ("invalid value for sqlite_synchronous", "agentd.toml")),
        ("", {"AGENTD_PORT": "99999"}, ("invalid value for port", "AGENTD_PORT")),
        ('colour = "blue"\n', {}, ("unknown setting 'colour'", "agentd.toml")),
        ('port = 8765\nhost = "127.0.0.1\n', {}, ("agentd.toml", "not valid TOML")),
        ("", {"AGENTD_LEASE_S": "0.1"}, ("invalid value for lease_s", "AGENTD_LEASE_S")),
        ("[evidence]\nredundancy = 2\n", {}, ("invalid value for evidence.redundancy", "agentd.toml")),
        ("[evidence]\nweight = 0.5\n", {}, ("unknown setting 'evidence.weight'", "agentd.toml")),
    ],
    ids=[
        "toml-port-not-a-number", "toml-synchronous-unknown", "env-port-out-of-range", "toml-unknown-key",
        "toml-syntax-error", "env-lease-too-short", "toml-evidence-weight-out-of-range", "toml-evidence-unknown-key",
    ],
)
def test_invalid_setting_names_the_key_and_where_it_came_from(agentd, data_dir, db_url, tmp_path, toml, env, names):
    ids = seed_tasks(db_url, tmp_path, 2)
    config = tmp_path / "agentd.toml"
    if toml:
        config.write_text(toml, encoding="utf-8")
    before = digest(data_dir / "agentd.db")
    result = agentd("--data-dir", str(data_dir), "task", "list", env=env)
    line = one_error_line(result, *names)
    assert result.returncode == 2, line
    assert digest(data_dir / "agentd.db") == before
    config.unlink(missing_ok=True)
    assert listed_task_ids(agentd, data_dir) == ids


def test_config_error_leaves_stdout_empty(agentd, data_dir):
    """Scripts read stdout (`--json`): a failing command must not print its log record or traceback there."""
    result = agentd("--data-dir", str(data_dir), "task", "list", "--json", env={"AGENTD_PORT": "99999"})
    one_error_line(result, "AGENTD_PORT")
    assert result.stdout == "", f"stdout of a failed command: {result.stdout[:300]!r}"


# -- 10: import into a store that is not empty, or of a broken sequence ---------------------------


def test_import_into_a_non_empty_store_is_refused_and_adds_nothing(agentd, data_dir, db_url, tmp_path):
    ids = seed_tasks(db_url, tmp_path, 2)
    source = tmp_path / "export.jsonl"
    source.write_text(export_line(1, "t-imported", 1, "TaskSubmitted", submitted("imported")) + "\n", encoding="utf-8")
    before = event_count(data_dir / "agentd.db")
    line = one_error_line(agentd("--data-dir", str(data_dir), "events", "import", str(source)))
    assert "empty" in line, line
    assert event_count(data_dir / "agentd.db") == before == 2
    assert listed_task_ids(agentd, data_dir) == ids


@pytest.mark.parametrize(
    "second",
    [
        export_line(3, "t-b", 1, "TaskSubmitted", submitted("after a gap in seq")),
        export_line(2, "t-a", 3, "TaskPhaseChanged", {"phase": "running"}),
    ],
    ids=["gap-in-seq", "gap-in-stream-version"],
)
def test_import_with_a_gap_names_the_line_and_imports_nothing(agentd, data_dir, tmp_path, second):
    source = tmp_path / "export.jsonl"
    lines = chained([export_line(1, "t-a", 1, "TaskSubmitted", submitted("first")), second])
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = agentd("--data-dir", str(data_dir), "events", "import", str(source))
    one_error_line(result, "line 2")
    assert event_count(data_dir / "agentd.db") == 0, "a refused import left events behind"


# -- 11: tasks that do not exist, or cannot be cancelled ------------------------------------------


def test_show_of_an_unknown_task_names_the_id(agentd, data_dir, db_url, tmp_path):
    seed_tasks(db_url, tmp_path, 1)
    one_error_line(agentd("--data-dir", str(data_dir), "task", "show", "t-nosuchtask"), "t-nosuchtask")


def test_cancel_of_a_cancelled_task_says_so_and_writes_nothing(agentd, data_dir, db_url, tmp_path):
    [task_id] = seed_tasks(db_url, tmp_path, 1)
    dd = ("--data-dir", str(data_dir))
    assert ok(agentd(*dd, "task", "cancel", task_id)).strip() == f"{task_id} cancelled"
    line = one_error_line(agentd(*dd, "task", "cancel", task_id), task_id)
    assert "already cancelled" in line, line
    one_error_line(agentd(*dd, "task", "cancel", "t-nosuchtask"), "t-nosuchtask")
    assert event_count(data_dir / "agentd.db") == 2
    ok(agentd(*dd, "replay"))


@pytest.mark.parametrize("spec, names", [
    ("everything", ["unknown context policy 'everything'", "window:K"]),
    ("window:0", ["at least one step", "window:0"]),
    ("elide_tool_results", ["needs a number"]),
])
def test_submit_with_a_bad_context_policy_names_it_and_submits_nothing(agentd, data_dir, spec, names):
    result = agentd("--data-dir", str(data_dir), "task", "submit", "x", "--policy", spec)
    one_error_line(result, *names)
    assert result.returncode == 2 and result.stdout == ""
    assert not (data_dir / "agentd.db").exists()
    assert "--policy" in agentd("task", "submit", "--help").stdout


def test_a_bad_context_policy_setting_is_one_line_naming_where_it_came_from(agentd, data_dir, tmp_path):
    result = agentd("--data-dir", str(data_dir), "task", "submit", "x", env={"AGENTD_CONTEXT_POLICY": "window:0"})
    one_error_line(result, "context_policy", "AGENTD_CONTEXT_POLICY", "at least one step")
    assert result.returncode == 2 and not (data_dir / "agentd.db").exists()


def test_a_task_takes_its_policy_from_the_flag_else_the_profile_else_the_setting(agentd, data_dir, tmp_path):
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "from runtime.agent.profiles import WORKSPACE\n"
        "def register(tools, profiles):\n"
        "    profiles['windowed'] = WORKSPACE.model_copy(update={'name': 'windowed', 'context_policy': 'window:3'})\n"
    )
    config = tmp_path / "agentd.toml"
    config.write_text(f'plugins = ["{plugin}"]\ncontext_policy = "user_verbatim:2"\n')
    env = {}
    dd = ("--config", str(config), "--data-dir", str(data_dir))
    ids = [
        agentd(*dd, "task", "submit", "x", env=env).stdout.strip(),
        agentd(*dd, "task", "submit", "x", "--profile", "windowed", env=env).stdout.strip(),
        agentd(*dd, "task", "submit", "x", "--profile", "windowed", "--policy", "full", env=env).stdout.strip(),
    ]
    policies = []
    for task_id in ids:
        shown = agentd(*dd, "events", "list", "--task", task_id, "--type", "TaskSubmitted", "--json")
        policies.append(json.loads(shown.stdout)["payload"]["policy"])
    assert policies == ["user_verbatim:2", "window:3", "full"]


def test_replay_under_a_bad_policy_or_without_a_task_is_one_line_and_exit_2(agentd, data_dir):
    ok(agentd("--data-dir", str(data_dir), "db", "upgrade"))  # replay reads a database; it makes none
    one_error_line(agentd("--data-dir", str(data_dir), "replay", "--task", "t-x", "--policy", "most"), "most")
    result = agentd("--data-dir", str(data_dir), "replay", "--policy", "full")
    assert result.returncode == 2 and "--policy goes with --task" in result.stderr


def test_model_serve_without_the_servers_packages_is_one_line_naming_them(agentd, data_dir, tmp_path):
    hidden = tmp_path / "hide"
    hidden.mkdir()
    # As on an install without llama-cpp-python's server extra: the package cannot be found.
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules['fastapi'] = None\n")
    env = {"PYTHONPATH": os.pathsep.join([str(hidden), str(REPO)])}
    result = agentd("--data-dir", str(data_dir), "model", "serve", "--model", "smollm2-135m", env=env)
    one_error_line(result, "fastapi", "llama-cpp-python[server]")


def test_a_budget_past_what_a_database_holds_is_a_usage_error_and_submits_nothing(agentd, data_dir):
    for option in ("--max-tokens", "--max-steps"):
        result = agentd("--data-dir", str(data_dir), "task", "submit", "x", option, str(2**63))
        assert result.returncode == 2, (option, result.stderr)
        assert f"Invalid value for '{option}'" in result.stderr
    listed = agentd("--data-dir", str(data_dir), "task", "list").stdout
    assert not (data_dir / "agentd.db").exists() or "(none)" in listed

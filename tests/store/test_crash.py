"""kill -9 in the middle of group-committed appends: no acknowledged event is lost, no batch is half written.

A child process runs several threads, each appending to its own task stream through the single writer
(so their requests are group-committed together), and prints one ACK line per append that returned. The
parent kills it with SIGKILL at a random moment, reopens the database and checks the log's invariants.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from store import EventStore, log, replay
from store.events import ModelCalled, TaskSubmitted, ToolCallExecuted, ToolCallProposed
from tests.helpers import REPO

THREADS = 8
REQUEST_TYPES = ["ModelCalled", "ToolCallProposed", "ToolCallExecuted"]
# SQLite's PRAGMA synchronous as a number.
SYNCHRONOUS_LEVEL = {"off": 0, "normal": 1, "full": 2}

CHILD = textwrap.dedent(
    '''
    """Append from many threads until killed; print ACK <stream> <version> <correlation_id> per committed append."""
    import os
    import sys
    import threading
    import time
    import uuid

    from store import EventStore
    from store.events import ModelCalled, TaskSubmitted, ToolCallExecuted, ToolCallProposed

    url, threads, synchronous = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = EventStore(url) if synchronous == "default" else EventStore(url, synchronous=synchronous)
    with store.engines.write.connect() as conn:
        level = conn.exec_driver_sql("PRAGMA synchronous").scalar()
        conn.rollback()
    out = threading.Lock()


    def ack(stream, version, correlation_id):
        line = f"ACK {stream} {version} {correlation_id}\\n"
        with out:
            sys.stdout.write(line)
            sys.stdout.flush()


    def worker(i):
        stream = f"t-crash{i:02d}"
        records = store.append(stream, [TaskSubmitted(goal=f"crash test {i}", workspace="/w")], expected_version=0)
        version = records[-1].stream_version
        ack(stream, version, "-")
        step = 0
        deadline = time.monotonic() + 60  # never outlive a parent that forgot to kill us
        while time.monotonic() < deadline:
            step += 1
            cid = str(uuid.uuid4())
            events = [
                ModelCalled(call_index=step, model="m", prompt_tokens=7, completion_tokens=3, output="o" * (step % 50)),
                ToolCallProposed(call_id=cid, tool="write_file", arguments={"path": f"f{step}.txt", "text": "x" * 100}),
                ToolCallExecuted(call_id=cid, tool="write_file", status="ok", observation={"bytes": 100}),
            ]
            records = store.append(stream, events, expected_version=version, correlation_id=cid, causation_id=cid)
            version = records[-1].stream_version
            ack(stream, version, cid)


    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    print(f"READY pid={os.getpid()} synchronous={level}", flush=True)
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    '''
)


@dataclass
class Run:
    seed: int
    ready: str = ""
    acks: list[tuple[str, int, str]] = field(default_factory=list)
    stderr: str = ""
    returncode: int | None = None
    acks_at_kill: int = 0


def crash_once(tmp_path: Path, seed: int, synchronous: str) -> tuple[Run, str]:
    """Run the child on a fresh database, SIGKILL it at a random moment after some ACKs, return what it said."""
    rng = random.Random(seed)
    work = tmp_path / f"run-{seed}"
    work.mkdir()
    script = work / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    url = f"sqlite:///{work / 'agentd.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = Run(seed)
    proc = subprocess.Popen(
        [sys.executable, str(script), url, str(THREADS), synchronous],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=work,
    )
    lines: list[str] = []
    got_line = threading.Condition()

    def read_stdout() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            with got_line:
                lines.append(raw.decode())
                got_line.notify_all()

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        min_acks = rng.randint(1, 40)
        deadline = time.monotonic() + 30
        with got_line:
            while sum(1 for ln in lines if ln.startswith("ACK ")) < min_acks:
                assert proc.poll() is None, (
                    f"seed {seed}: the child died before the kill: {proc.stderr.read().decode()}"
                )
                assert time.monotonic() < deadline, f"seed {seed}: no {min_acks} ACKs within 30 s"
                got_line.wait(0.05)
        time.sleep(rng.uniform(0.05, 0.8))
        assert proc.poll() is None, f"seed {seed}: the child exited by itself before the kill"
        with got_line:
            run.acks_at_kill = sum(1 for ln in lines if ln.startswith("ACK "))
        os.kill(proc.pid, signal.SIGKILL)
        run.returncode = proc.wait(timeout=30)
        reader.join(timeout=30)
        assert proc.stderr is not None
        run.stderr = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for ln in lines:
        if not ln.endswith("\n"):
            continue  # a line cut by the kill acknowledges nothing
        parts = ln.split()
        if parts[0] == "READY":
            run.ready = ln.strip()
        elif parts[0] == "ACK":
            run.acks.append((parts[1], int(parts[2]), parts[3]))
    return run, url


def check_invariants(run: Run, url: str, scratch: Path) -> None:
    """Reopen the store after the crash and hold the log and the projections to every invariant."""
    seed = run.seed
    where = f"seed {seed}"
    assert run.returncode == -signal.SIGKILL, (
        f"{where}: the child was not killed by SIGKILL: {run.returncode} {run.stderr}"
    )
    assert "Traceback" not in run.stderr, f"{where}: the child failed before the kill:\n{run.stderr}"
    assert run.acks, f"{where}: no ACK at all"

    with EventStore(url) as store:
        with store.reading() as conn:
            raws = list(log.iter_raw(conn))
            # Every row still decodes as its event type.
            records = list(log.iter_records(conn))
            integrity = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check")]
        assert integrity == ["ok"], f"{where}: integrity check after the crash: {integrity}"
        assert len(records) == len(raws)

        # seq is 1..max with no gap.
        seqs = [r.seq for r in raws]
        assert seqs == list(range(1, len(raws) + 1)), f"{where}: seq has gaps or duplicates: {seqs[:20]}..."

        # Per stream, stream_version is 1..n with no gap, and the stream starts with its submission.
        by_stream: dict[str, list] = defaultdict(list)
        for r in raws:
            by_stream[r.stream_id].append(r)
        for stream, rows in by_stream.items():
            versions = [r.stream_version for r in rows]
            assert versions == list(range(1, len(rows) + 1)), f"{where}: {stream} versions {versions}"
            assert rows[0].type == "TaskSubmitted", f"{where}: {stream} starts with {rows[0].type}"

        # Every correlation id in the log covers exactly one whole request: 3 events, in order, contiguous.
        by_cid: dict[str, list] = defaultdict(list)
        for r in raws:
            if r.correlation_id is not None:
                by_cid[r.correlation_id].append(r)
        partial = {cid: len(rows) for cid, rows in by_cid.items() if len(rows) != 3}
        assert not partial, f"{where}: partial batches in the log (correlation id: events): {partial}"
        for cid, rows in by_cid.items():
            assert [r.type for r in rows] == REQUEST_TYPES, f"{where}: request {cid} holds {[r.type for r in rows]}"
            assert len({r.stream_id for r in rows}) == 1, f"{where}: request {cid} spans streams"
            assert [r.stream_version for r in rows] == list(
                range(rows[0].stream_version, rows[0].stream_version + 3)
            ), f"{where}: request {cid} versions {[r.stream_version for r in rows]}"
            assert [r.seq for r in rows] == list(range(rows[0].seq, rows[0].seq + 3)), (
                f"{where}: request {cid} is interleaved"
            )

        # Every acknowledged append is in the log, whole, where the ACK said it ended.
        last_acked: dict[str, int] = {}
        for stream, version, cid in run.acks:
            rows = by_stream.get(stream, [])
            assert len(rows) >= version, (
                f"{where}: ACKed {stream} v{version} ({cid}) but the stream has {len(rows)} events"
            )
            if cid == "-":
                assert rows[0].type == "TaskSubmitted"
            else:
                got = by_cid.get(cid, [])
                assert len(got) == 3, f"{where}: ACKed request {cid} has {len(got)} of its 3 events after the crash"
                assert got[-1].stream_id == stream and got[-1].stream_version == version, (
                    f"{where}: ACKed request {cid} ends at {got[-1].stream_id} v{got[-1].stream_version}, "
                    f"not {stream} v{version}"
                )
            last_acked[stream] = max(last_acked.get(stream, 0), version)

        # Each thread appends one request at a time: beyond its last ACK a stream may hold at most the one
        # request that committed before the kill let the ACK out.
        for stream, rows in by_stream.items():
            acked = last_acked.get(stream, 0)
            unacked_allowed = (0, 1) if acked == 0 else (0, 3)
            assert len(rows) - acked in unacked_allowed, (
                f"{where}: {stream} holds {len(rows)} events but its last ACK was v{acked}"
            )
        assert set(last_acked) <= set(by_stream)

        # The projections agree with the log, row by row and through a full rebuild.
        counts = Counter(r.stream_id for r in raws if r.type == "ToolCallExecuted")
        for stream, rows in by_stream.items():
            state = store.task(stream)
            assert state is not None, f"{where}: {stream} is in the log but not in the tasks projection"
            assert state.summary.version == len(rows), f"{where}: {stream} projected at v{state.summary.version}"
            assert state.summary.last_seq == rows[-1].seq
            assert state.summary.steps == counts[stream] == len(state.actions)
        assert len(store.tasks()) == len(by_stream)
        with store.reading() as conn:
            rebuilt = replay.verify(conn, f"sqlite:///{scratch / f'rebuilt-{seed}.db'}")
        assert rebuilt.events == len(raws)

        # The store takes new appends after the restart, right after the last committed event.
        stream = sorted(by_stream)[0]
        version = len(by_stream[stream])
        cid = f"after-restart-{seed}"
        records = store.append(
            stream,
            [
                ModelCalled(call_index=999, model="m", prompt_tokens=1, completion_tokens=1),
                ToolCallProposed(call_id=cid, tool="noop"),
                ToolCallExecuted(call_id=cid, tool="noop", status="ok"),
            ],
            expected_version=version,
            correlation_id=cid,
        )
        assert [r.seq for r in records] == [len(raws) + 1, len(raws) + 2, len(raws) + 3]
        assert [r.stream_version for r in records] == [version + 1, version + 2, version + 3]
        fresh = store.append(
            "t-after-restart", [TaskSubmitted(goal="after the crash", workspace="/w")], expected_version=0
        )
        assert fresh[0].seq == len(raws) + 4 and fresh[0].stream_version == 1
        assert store.task(stream).summary.version == version + 3
    with EventStore(url) as again:
        assert again.last_seq() == len(raws) + 4


def seeds(base: int, n: int) -> list[int]:
    return [base + i * 7919 for i in range(n)]


@pytest.mark.slow
def test_kill_9_during_group_commit_loses_no_acknowledged_event_and_leaves_no_partial_batch(tmp_path: Path) -> None:
    """25 crashes, each on a fresh database with the durable default (synchronous=full)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    total_acks = 0
    for seed in seeds(20261129, 25):
        run, url = crash_once(tmp_path, seed, "default")
        assert run.ready.endswith(f"synchronous={SYNCHRONOUS_LEVEL['full']}"), (
            f"seed {seed}: the default is not synchronous=full: {run.ready!r}"
        )
        check_invariants(run, url, scratch)
        total_acks += len(run.acks)
    # The children were really killed mid-flight, with many appends acknowledged across the runs.
    assert total_acks >= 25 * THREADS


@pytest.mark.slow
def test_kill_9_with_synchronous_normal_also_loses_no_acknowledged_event(tmp_path: Path) -> None:
    """synchronous=normal may lose commits on power loss, never on a process crash: the same invariants hold."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for seed in seeds(4242, 6):
        run, url = crash_once(tmp_path, seed, "normal")
        assert run.ready.endswith(f"synchronous={SYNCHRONOUS_LEVEL['normal']}"), f"seed {seed}: {run.ready!r}"
        check_invariants(run, url, scratch)

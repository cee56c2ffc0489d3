"""Behaviour every event-store backend must show. Each backend's test module subclasses StoreContract
and provides a `store` fixture (and `raw_insert` when it stores rows differently)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from store import (
    ANY,
    NO_STREAM,
    ConcurrencyConflict,
    EventStore,
    InvalidEvent,
    StoreError,
    UnknownEventType,
    audit,
    log,
)
from store.errors import LogDamaged
from store.events import (
    ApprovalGranted,
    ApprovalRequested,
    ArtifactDeleted,
    ArtifactRead,
    ArtifactWritten,
    ModelCalled,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    TestsRan,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)
from store.state import fold

SHA_A = "a" * 64
SHA_B = "b" * 64


def submitted(goal: str = "fix the failing test") -> TaskSubmitted:
    return TaskSubmitted(goal=goal, workspace="/srv/agent-workspace")


class StoreContract:
    @pytest.fixture
    def store(self) -> EventStore:
        raise NotImplementedError

    def raw_insert(self, store: EventStore, **row) -> None:
        """Write a row straight into the log, as an older or newer agentd (or a bug) might have."""
        store.in_write_transaction(lambda conn: conn.execute(log.events.insert(), row))

    def next_row(self, store: EventStore, stream_id: str, type_: str, payload: str) -> dict:
        return dict(
            seq=store.last_seq() + 1,
            stream_id=stream_id,
            stream_version=store.stream_version(stream_id) + 1,
            type=type_,
            schema_version=1,
            payload=payload,
            recorded_at="2026-11-29T00:00:00.000000Z",
            actor="test",
            causation_id=None,
            correlation_id=None,
        )

    # -- appending -------------------------------------------------------------------------------

    def test_append_assigns_consecutive_seq_and_stream_versions(self, store: EventStore) -> None:
        a = store.append("t-a", [submitted(), TaskPhaseChanged(phase=TaskPhase.RUNNING)], expected_version=NO_STREAM)
        b = store.append("t-b", [submitted()], expected_version=NO_STREAM)
        c = store.append(
            "t-a", [ModelCalled(call_index=1, model="m", prompt_tokens=5, completion_tokens=2)], expected_version=2
        )
        assert [r.seq for r in a + b + c] == [1, 2, 3, 4]
        assert [r.stream_version for r in a] == [1, 2]
        assert [r.stream_version for r in b] == [1]
        assert [r.stream_version for r in c] == [3]
        assert store.stream_version("t-a") == 3
        assert store.last_seq() == 4

    def test_stale_expected_version_raises_conflict_and_writes_nothing(self, store: EventStore) -> None:
        store.append("t-a", [submitted()], expected_version=NO_STREAM)
        store.append("t-a", [TaskPhaseChanged(phase=TaskPhase.RUNNING)], expected_version=1)
        with pytest.raises(ConcurrencyConflict) as err:
            store.append("t-a", [TaskPhaseChanged(phase=TaskPhase.CANCELLED)], expected_version=1)
        assert (err.value.expected, err.value.actual) == (1, 2)
        assert store.stream_version("t-a") == 2
        assert store.last_seq() == 2
        assert store.task("t-a").summary.phase == "running"

    def test_no_stream_refuses_a_stream_that_exists(self, store: EventStore) -> None:
        store.append("t-a", [submitted()], expected_version=NO_STREAM)
        with pytest.raises(ConcurrencyConflict):
            store.append("t-a", [submitted()], expected_version=NO_STREAM)
        assert store.last_seq() == 1

    def test_any_expected_version_appends_at_whatever_version_the_stream_has(self, store: EventStore) -> None:
        store.append("t-a", [submitted()], expected_version=ANY)
        records = store.append("t-a", [TaskPhaseChanged(phase=TaskPhase.RUNNING)], expected_version=ANY)
        assert records[0].stream_version == 2

    def test_an_append_is_all_or_nothing_when_a_later_event_is_refused(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        with pytest.raises(StoreError, match="not pending"):
            store.append(
                "t-a",
                [TaskPhaseChanged(phase=TaskPhase.RUNNING), ApprovalGranted(approval_id="nope", by="ann")],
            )
        assert store.stream_version("t-a") == 1
        assert store.task("t-a").summary.phase == "submitted"

    def test_a_refused_request_does_not_fail_the_others_committed_with_it(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        futures = [store.submit(f"t-{i}", [submitted()], expected_version=NO_STREAM) for i in range(20)]
        futures.append(store.submit("t-a", [submitted()], expected_version=NO_STREAM))
        futures += [store.submit(f"t-x{i}", [submitted()], expected_version=NO_STREAM) for i in range(20)]
        outcomes = [f.exception() for f in futures]
        assert isinstance(outcomes[20], ConcurrencyConflict)
        assert [o for i, o in enumerate(outcomes) if i != 20] == [None] * 40
        assert store.last_seq() == 41
        seqs = sorted(r.seq for f in futures if f.exception() is None for r in f.result())
        assert seqs == list(range(2, 42))

    def test_concurrent_appenders_all_land_with_gapless_versions(self, store: EventStore) -> None:
        streams = [f"t-{i}" for i in range(16)]
        for s in streams:
            store.append(s, [submitted()], expected_version=NO_STREAM)

        def work(stream: str) -> None:
            for n in range(25):
                store.append(
                    stream,
                    [ModelCalled(call_index=n + 1, model="m", prompt_tokens=1, completion_tokens=1)],
                    expected_version=n + 1,
                )

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(work, streams))
        assert store.last_seq() == 16 * 26
        for s in streams:
            assert [r.stream_version for r in store.read_stream(s)] == list(range(1, 27))
            assert store.task(s).summary.steps == 25

    def test_metadata_is_recorded_with_each_event(self, store: EventStore) -> None:
        [rec] = store.append("t-a", [submitted()], actor="ann", causation_id="c-1", correlation_id="r-1")
        [back] = store.read_stream("t-a")
        assert back == rec
        assert (back.actor, back.causation_id, back.correlation_id) == ("ann", "c-1", "r-1")
        assert back.recorded_at.endswith("Z") and back.seq == 1

    @pytest.mark.anyio
    async def test_async_append_records_like_append(self, store: EventStore) -> None:
        records = await store.append_async("t-a", [submitted()], expected_version=NO_STREAM)
        assert records[0].seq == 1 and store.task("t-a") is not None

    # -- the log is append-only ------------------------------------------------------------------

    def test_the_database_refuses_to_update_or_delete_events(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        for statement in ("UPDATE events SET actor = 'mallory'", "DELETE FROM events"):
            with pytest.raises(Exception, match="append-only"):
                store.in_write_transaction(lambda conn, statement=statement: conn.execute(text(statement)))
        assert store.read_stream("t-a")[0].actor == "agentd"

    # -- the chain -------------------------------------------------------------------------------

    def test_every_event_is_chained_to_the_one_before_and_the_log_checks_whole(self, store: EventStore) -> None:
        store.append("t-a", [submitted(), TaskPhaseChanged(phase=TaskPhase.RUNNING)])
        store.submit("t-b", [submitted()]).result()
        with store.reading() as conn:
            hashes = [r.hash for r in log.iter_raw(conn)]
            audit.check_log(conn, None)
        assert len(set(hashes)) == 3 and all(h and len(h) == 64 for h in hashes)

    def test_a_row_written_behind_the_stores_back_breaks_the_chain_at_its_seq(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        self.raw_insert(store, **self.next_row(store, "t-a", "TaskPhaseChanged", '{"phase": "running"}'))
        store.append("t-a", [TaskPhaseChanged(phase=TaskPhase.COMPLETED)])
        with store.reading() as conn, pytest.raises(LogDamaged, match="event 2 has no chain hash"):
            audit.check_log(conn, None)

    # -- tool calls ------------------------------------------------------------------------------

    def test_a_tool_call_starts_only_once_proposed_and_has_one_result(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        with pytest.raises(StoreError, match="event 2 starts call c1 of t-a, which was never proposed"):
            store.append("t-a", [ToolCallStarted(call_id="c1", tool="shell", idempotent=False)])
        store.append("t-a", [ToolCallProposed(call_id="c1", tool="shell"),
                             ToolCallStarted(call_id="c1", tool="shell", idempotent=False)])
        with pytest.raises(StoreError, match="event 4 starts call c1 of t-a again"):
            store.append("t-a", [ToolCallStarted(call_id="c1", tool="shell", idempotent=False)])
        store.append("t-a", [ToolCallExecuted(call_id="c1", tool="shell", status="ok")])
        with pytest.raises(StoreError, match="event 5 records a second result for call c1"):
            store.append("t-a", [ToolCallExecuted(call_id="c1", tool="shell", status="ok")])
        assert [a.call_id for a in store.task("t-a").actions] == ["c1"]

    def test_a_call_a_person_approved_running_again_may_start_again(self, store: EventStore) -> None:
        store.append("t-a", [submitted(), ToolCallProposed(call_id="c1", tool="shell"),
                             ToolCallStarted(call_id="c1", tool="shell", idempotent=False)])
        store.append("t-a", [ApprovalRequested(approval_id="ap-1", call_id="c1", tool="shell", arguments_hash=SHA_A)])
        store.append("t-a", [ApprovalGranted(approval_id="ap-1", by="ann")])
        store.append("t-a", [ToolCallStarted(call_id="c1", tool="shell", idempotent=False),
                             ToolCallExecuted(call_id="c1", tool="shell", status="ok")])
        assert store.task("t-a").actions[0].status == "ok"

    # -- reading ---------------------------------------------------------------------------------

    def test_unknown_event_type_in_the_log_is_reported_with_its_seq(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        self.raw_insert(store, **self.next_row(store, "t-a", "FutureThing", "{}"))
        with pytest.raises(UnknownEventType) as err:
            store.read_stream("t-a")
        assert err.value.seq == 2 and "FutureThing" in str(err.value)

    def test_invalid_payload_in_the_log_is_reported_with_its_seq(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        self.raw_insert(store, **self.next_row(store, "t-a", "TaskPhaseChanged", '{"phase": "dancing"}'))
        with pytest.raises(InvalidEvent, match="event 2 .*phase"):
            store.read_stream("t-a")

    # -- projections -----------------------------------------------------------------------------

    def test_task_state_is_current_as_soon_as_the_append_returns(self, store: EventStore) -> None:
        store.append("t-a", [submitted("ship it")])
        store.append(
            "t-a",
            [
                TaskPhaseChanged(phase=TaskPhase.RUNNING),
                ModelCalled(call_index=1, model="m", prompt_tokens=100, completion_tokens=20),
                ToolCallProposed(call_id="c1", tool="read_file", arguments={"path": "a.py"}),
                ToolCallExecuted(call_id="c1", tool="read_file", status="ok"),
                ApprovalRequested(approval_id="ap-1", call_id="c2", tool="shell", arguments_hash=SHA_A),
            ],
        )
        state = store.task("t-a")
        assert state.summary.goal == "ship it"
        assert state.phase is TaskPhase.RUNNING
        assert (state.summary.steps, state.summary.tokens_used) == (1, 120)
        assert [(a.tool, a.status) for a in state.actions] == [("read_file", "ok")]
        assert [a.approval_id for a in state.pending_approvals] == ["ap-1"]
        store.append("t-a", [ApprovalGranted(approval_id="ap-1", by="ann")])
        state = store.task("t-a")
        assert state.pending_approvals == ()
        assert state.approvals[0].decided_by == "ann"

    def test_artifact_index_records_path_operation_hash_size_seq_and_test_result(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        recs = store.append(
            "t-a",
            [
                ArtifactRead(path="src/a.py", sha256=SHA_A, size=10),
                ArtifactWritten(path="src/a.py", sha256=SHA_B, size=12),
                ArtifactWritten(path="tests/test_a.py", sha256=SHA_A, size=30),
                TestsRan(command="pytest", status="passed", paths=("src/a.py",)),
                ArtifactDeleted(path="old.txt"),
            ],
        )
        arts = store.task("t-a").artifacts
        assert [(a.path, a.operation, a.sha256, a.size, a.seq) for a in arts] == [
            ("src/a.py", "read", SHA_A, 10, recs[0].seq),
            ("src/a.py", "write", SHA_B, 12, recs[1].seq),
            ("tests/test_a.py", "write", SHA_A, 30, recs[2].seq),
            ("old.txt", "delete", None, None, recs[4].seq),
        ]
        # The test result lands on the latest version of the tested file, not on earlier reads.
        assert [(a.test_status, a.test_seq) for a in arts] == [
            (None, None), ("passed", recs[3].seq), (None, None), (None, None)
        ]
        assert store.task("t-a").summary.test_status == "passed"

    def test_task_event_on_a_stream_with_no_submitted_task_is_refused(self, store: EventStore) -> None:
        with pytest.raises(StoreError, match="not a submitted task"):
            store.append("t-ghost", [TaskPhaseChanged(phase=TaskPhase.RUNNING)])
        assert store.last_seq() == 0

    def test_task_at_a_seq_is_the_fold_of_the_log_up_to_it(self, store: EventStore) -> None:
        store.append("t-a", [submitted()])
        store.append("t-b", [submitted()])
        store.append("t-a", [TaskPhaseChanged(phase=TaskPhase.RUNNING)])
        store.append("t-a", [TaskPhaseChanged(phase=TaskPhase.COMPLETED)])
        assert store.task_at("t-a", 1).summary.phase == "submitted"
        assert store.task_at("t-a", 2).summary.version == 1
        assert store.task_at("t-a", 3).summary.phase == "running"
        assert store.task_at("t-a", 4).summary.finished_at is not None
        assert store.task_at("t-b", 1) is None
        assert store.task_at("t-a", 4) == store.task("t-a")

    def test_projections_equal_the_fold_of_the_whole_log(self, store: EventStore) -> None:
        store.append("t-a", [submitted(), TaskPhaseChanged(phase=TaskPhase.RUNNING)])
        store.append(
            "t-a",
            [ArtifactWritten(path="x", sha256=SHA_A, size=1), TestsRan(command="t", status="failed", paths=("x",))],
        )
        store.append("t-b", [submitted()])
        with store.reading() as conn:
            folded = fold(log.iter_records(conn))
        assert folded == {t: store.task(t) for t in ("t-a", "t-b")}


def run_in_threads(n: int, fn) -> list:
    results: list = [None] * n
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, fn(i))) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results

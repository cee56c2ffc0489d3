"""For any sequence of task events, the live projections equal the pure fold of the log, and replay agrees."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import EventStore, fold, log
from store.events import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    ArtifactDeleted,
    ArtifactRead,
    ArtifactWritten,
    ModelCalled,
    SkillActivated,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    TestsRan,
    ToolCallExecuted,
    ToolCallProposed,
)
from store.replay import verify

PATHS = ["a.py", "b.py", "docs/c.md"]
HEX = "0123456789abcdef"

step = st.tuples(
    st.integers(0, 3),  # which task
    st.sampled_from(
        ["phase", "model", "propose", "execute", "request", "grant", "deny", "read", "write", "delete", "tests", "skill"]
    ),
    st.integers(0, 10_000),  # a number the event uses for its fields
    st.booleans(),  # end this append here (so batches of every size happen)
)


class Model:
    """Just enough state to make every generated event one the store accepts."""

    def __init__(self) -> None:
        self.pending: dict[str, list[str]] = {}
        self.approvals = 0

    def event(self, task: str, kind: str, n: int):
        pending = self.pending.setdefault(task, [])
        if kind == "phase":
            return TaskPhaseChanged(phase=list(TaskPhase)[n % len(TaskPhase)], reason=f"r{n}")
        if kind == "model":
            return ModelCalled(call_index=n + 1, model="m", prompt_tokens=n, completion_tokens=n % 97)
        if kind == "propose":
            return ToolCallProposed(call_id=f"c{n}", tool="read_file", arguments={"path": PATHS[n % 3]})
        if kind == "execute":
            return ToolCallExecuted(call_id=f"c{n}", tool=["read_file", "shell"][n % 2], status=["ok", "error"][n % 2])
        if kind == "request":
            self.approvals += 1
            approval_id = f"ap-{self.approvals}"
            pending.append(approval_id)
            return ApprovalRequested(approval_id=approval_id, call_id=f"c{n}", tool="shell", arguments_hash=HEX[n % 16] * 64)
        if kind in ("grant", "deny") and pending:
            approval_id = pending.pop(n % len(pending))
            if kind == "grant":
                return ApprovalGranted(approval_id=approval_id, by=f"user{n % 3}")
            return ApprovalDenied(approval_id=approval_id, by=f"user{n % 3}", reason=f"no {n}")
        if kind == "read":
            return ArtifactRead(path=PATHS[n % 3], sha256=HEX[n % 16] * 64, size=n)
        if kind == "write":
            return ArtifactWritten(path=PATHS[n % 3], sha256=HEX[(n + 1) % 16] * 64, size=n + 1)
        if kind == "delete":
            return ArtifactDeleted(path=PATHS[n % 3])
        if kind == "tests":
            return TestsRan(command="pytest", status=["passed", "failed", "error"][n % 3], paths=tuple(PATHS[: n % 4]))
        if kind == "skill":
            return SkillActivated(call_index=n % 5, name=f"skill-{n % 3}", content_hash=HEX[n % 16] * 64,
                                  folder=f"/skills/skill-{n % 3}", body=f"Do step {n}.")
        return None


@pytest.fixture(scope="module")
def template_db():
    """A migrated empty database, copied per example: migrating each time would dominate the run."""
    folder = Path(tempfile.mkdtemp())
    EventStore(f"sqlite:///{folder / 'template.db'}").close()
    yield folder / "template.db"
    shutil.rmtree(folder)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, max_size=60))
def test_projections_equal_the_fold_of_the_log_for_any_event_sequence(steps, template_db: Path) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        shutil.copy(template_db, folder / "x.db")
        with EventStore(f"sqlite:///{folder / 'x.db'}") as store:
            model = Model()
            submitted: set[str] = set()
            batch: dict[str, list] = {}

            def flush(task: str) -> None:
                if batch.get(task):
                    store.append(task, batch.pop(task))

            for index, kind, n, end in steps:
                task = f"t-{index}"
                if task not in submitted:
                    submitted.add(task)
                    batch.setdefault(task, []).append(TaskSubmitted(goal=f"goal {index}", workspace="/w"))
                event = model.event(task, kind, n)
                if event is not None:
                    batch.setdefault(task, []).append(event)
                if end:
                    flush(task)
            for task in list(batch):
                flush(task)

            with store.reading() as conn:
                records = list(log.iter_records(conn))
                folded = fold(records)
                verify(conn, f"sqlite:///{folder / 'rebuilt.db'}")
            assert set(folded) == submitted
            for task, state in folded.items():
                assert store.task(task) == state
    finally:
        shutil.rmtree(folder)

"""The file watcher, with real watchdog on temporary folders and a real store: rare, specific and true."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import AsyncIterator, Callable, TypeVar

import anyio
import pytest
from structlog.testing import capture_logs

from notifications import queue, watcher as watcher_module
from notifications.watcher import WorkspaceWatcher
from runtime.harness.tasks import submit_task
from store import EventStore
from store.events import (
    NOTIFICATIONS_STREAM,
    ArtifactRead,
    ArtifactWritten,
    NotificationEnqueued,
    TaskPhase,
    TaskPhaseChanged,
)

pytestmark = pytest.mark.anyio

T = TypeVar("T")


@pytest.fixture
def data_dir(workspace: Path) -> Path:
    # Inside the workspace on purpose: the store's own writes happen under the watched folder.
    d = workspace / ".agentd"
    d.mkdir()
    return d


@pytest.fixture
def store(data_dir: Path):
    with EventStore(f"sqlite:///{data_dir / 'agentd.db'}") as s:
        yield s


@contextlib.asynccontextmanager
async def watching(store: EventStore, data_dir: Path, **kw) -> AsyncIterator[WorkspaceWatcher]:
    watcher = WorkspaceWatcher(store, data_dir=data_dir, debounce_s=kw.pop("debounce_s", 0.1), **kw)
    async with anyio.create_task_group() as tg:
        await tg.start(watcher.run)
        observer = watcher._observer
        yield watcher
        tg.cancel_scope.cancel()
    assert observer is not None and not observer.is_alive()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def submit(store: EventStore, ws: Path) -> str:
    task_id = f"t-{len(store.tasks()) + 1}"
    store.append(task_id, submit_task("keep an eye on the notes", ws), expected_version=0)
    return task_id


def read(store: EventStore, task_id: str, ws: Path, rel: str, content: bytes | None = None) -> None:
    """Record that the task read `rel` (writing it first when `content` is given)."""
    if content is not None:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(content)
    data = (ws / rel).read_bytes()
    store.append(task_id, [ArtifactRead(path=rel, sha256=sha(data), size=len(data))])


def enqueued(store: EventStore) -> list[NotificationEnqueued]:
    return [r.event for r in store.read_stream(NOTIFICATIONS_STREAM)]


def pending(store: EventStore, task_id: str) -> list[queue.Pending]:
    with store.reading() as conn:
        return queue.pending(conn, task_id)


async def eventually(probe: Callable[[], T], timeout: float = 5.0) -> T:
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise AssertionError(f"still {value!r} after {timeout} s")
        await anyio.sleep(0.02)
    return value


async def test_a_change_to_a_file_the_task_read_is_one_notification_with_the_final_state(store, workspace, data_dir):
    task = submit(store, workspace)
    read(store, task, workspace, "notes.txt", b"release: May 3\n")
    async with watching(store, data_dir):
        final = b"release: June 14\n" * 71
        (workspace / "notes.txt").write_bytes(b"release: June\n")
        (workspace / "notes.txt").write_bytes(final)
        [p] = await eventually(lambda: pending(store, task))
        [note] = enqueued(store)
    digest = sha(final)
    assert p.text == (
        f"notes.txt was modified on disk: 1,207 bytes, sha256 {digest[:12]}…, not the content this task last read"
    )
    assert (note.source, note.kind, note.tasks) == ("file_watcher", "file_changed", (task,))
    assert note.dedupe_key == "file:notes.txt"
    assert {k: note.payload[k] for k in ("path", "exists", "size", "sha256")} == {
        "path": "notes.txt", "exists": True, "size": len(final), "sha256": digest,
    }
    assert note.payload["same_as_recorded"] is False


async def test_ten_quick_saves_drain_as_one_notification_with_the_last_content(store, workspace, data_dir):
    task = submit(store, workspace)
    read(store, task, workspace, "notes.txt", b"v0\n")
    async with watching(store, data_dir) as watcher:
        for n in range(1, 11):
            (workspace / "notes.txt").write_bytes(f"v{n}\n".encode())
            await anyio.sleep(0.005)
        await eventually(lambda: any(sha(b"v10\n")[:12] in p.text for p in pending(store, task)))
        assert watcher.stats().events_coalesced > 0
    [admitted] = queue.drain(pending(store, task))
    assert admitted.text.startswith(f"notes.txt was modified on disk: 4 bytes, sha256 {sha(b'v10' + bytes([10]))[:12]}")


async def test_files_the_task_never_touched_the_data_dir_and_editor_files_are_not_news(store, workspace, data_dir):
    task = submit(store, workspace)
    read(store, task, workspace, "notes.txt", b"a\n")
    # Even a data-dir path in the task's own index is not watched.
    read(store, task, workspace, ".agentd/copy.txt", b"a\n")
    async with watching(store, data_dir) as watcher:
        (workspace / "other.txt").write_text("never read\n")
        (data_dir / "copy.txt").write_text("changed\n")
        for name in (".notes.txt.swp", "notes.txt~", ".#notes.txt", "4913"):
            (workspace / name).write_text("editor\n")
        (workspace / "sub").mkdir()
        (workspace / "notes.txt").write_text("b\n")
        await eventually(lambda: pending(store, task))
        assert watcher.stats().events_ignored >= 5
    assert [n.payload["path"] for n in enqueued(store)] == ["notes.txt"]


async def test_agentd_s_own_write_is_not_news(store, workspace, data_dir):
    task = submit(store, workspace)
    read(store, task, workspace, "notes.txt", b"a\n")
    read(store, task, workspace, "other.txt", b"a\n")
    async with watching(store, data_dir):
        # As the write tool does it: a temporary file renamed over the target, then the record.
        written = b"written by the task\n"
        tmp = workspace / ".notes.txt.x1.tmp"
        tmp.write_bytes(written)
        os.replace(tmp, workspace / "notes.txt")
        store.append(task, [ArtifactWritten(path="notes.txt", sha256=sha(written), size=len(written))])
        (workspace / "other.txt").write_text("changed by someone else\n")
        await eventually(lambda: pending(store, task))
        await anyio.sleep(0.3)
    assert [n.payload["path"] for n in enqueued(store)] == ["other.txt"]


async def test_a_deleted_file_is_file_deleted(store, workspace, data_dir):
    task = submit(store, workspace)
    read(store, task, workspace, "notes.txt", b"a\n")
    async with watching(store, data_dir):
        (workspace / "notes.txt").unlink()
        [p] = await eventually(lambda: pending(store, task))
    [note] = enqueued(store)
    assert (note.kind, p.text) == ("file_deleted", "notes.txt was deleted on disk; this task last read it")
    assert {k: note.payload[k] for k in ("path", "exists", "size", "sha256")} == {
        "path": "notes.txt", "exists": False, "size": None, "sha256": None,
    }


async def test_a_move_is_a_delete_and_a_create(store, workspace, data_dir):
    task = submit(store, workspace)
    read(store, task, workspace, "a.txt", b"a\n")
    read(store, task, workspace, "b.txt", b"b\n")
    async with watching(store, data_dir):
        os.replace(workspace / "a.txt", workspace / "b.txt")
        await eventually(lambda: len(pending(store, task)) == 2)
    texts = sorted(p.text for p in pending(store, task))
    assert texts[0] == "a.txt was deleted on disk; this task last read it"
    assert texts[1].startswith("b.txt was modified on disk: 2 bytes")
    assert texts[1].endswith("not the content this task last read")


async def test_two_tasks_on_one_workspace_each_hear_once_and_a_finished_task_not_at_all(store, workspace, data_dir):
    first, second, done = submit(store, workspace), submit(store, workspace), submit(store, workspace)
    for task in (first, second, done):
        read(store, task, workspace, "notes.txt", b"a\n")
    store.append(done, [TaskPhaseChanged(phase=TaskPhase.COMPLETED)])
    (workspace / "sub").mkdir()
    submit(store, workspace / "sub")
    async with watching(store, data_dir) as watcher:
        # One recursive watch covers the workspace and the one nested in it.
        assert watcher.stats().watches == 1
        (workspace / "notes.txt").write_text("b\n")
        await eventually(lambda: pending(store, first) and pending(store, second))
        await anyio.sleep(0.3)
    assert sorted(n.tasks for n in enqueued(store)) == [(first,), (second,)]
    assert pending(store, done) == []


async def test_a_change_back_to_what_the_task_read_corrects_the_pending_notification(store, workspace, data_dir):
    task = submit(store, workspace)
    read(store, task, workspace, "notes.txt", b"a\n")
    async with watching(store, data_dir) as watcher:
        (workspace / "notes.txt").write_text("b\n")
        await eventually(lambda: pending(store, task))
        (workspace / "notes.txt").write_text("a\n")
        await eventually(lambda: watcher.stats().notifications_enqueued == 2)
    [admitted] = queue.drain(pending(store, task))
    assert admitted.text.endswith("the same content this task last read")


async def test_a_burst_of_10_000_events_stays_bounded_and_overflows_into_one_folder_notice(store, workspace, data_dir):
    burst = workspace / "burst"
    burst.mkdir()
    files = [burst / f"f{i:04}.txt" for i in range(2000)]
    for f in files:
        f.write_text("x\n")
    task = submit(store, workspace)
    read(store, task, workspace, "burst/f1999.txt")
    async with watching(store, data_dir, max_pending_paths=500) as watcher:
        for round_ in range(5):
            for f in files:
                os.utime(f, (round_, round_))
        await eventually(lambda: watcher.stats().events_seen >= 10_000)
        await eventually(lambda: pending(store, task))
        stats = watcher.stats()
    assert stats.pending_peak == 500
    # 500 paths kept (their later events coalesced); the other 1,500 files only counted.
    assert stats.events_overflowed >= 5_000
    [admitted] = queue.drain(pending(store, task))
    assert admitted.kind == "files_changed"
    assert admitted.text.startswith("many files changed under burst/")


async def test_a_missing_or_vanishing_workspace_is_skipped_with_a_warning(store, workspace, data_dir, tmp_path):
    gone, vanishing = tmp_path / "gone", tmp_path / "vanishing"
    gone.mkdir()
    vanishing.mkdir()
    submit(store, gone)
    submit(store, vanishing)
    shutil.rmtree(gone)
    task = submit(store, workspace)
    read(store, task, workspace, "notes.txt", b"a\n")
    with capture_logs() as logs:
        async with watching(store, data_dir) as watcher:
            assert (watcher.stats().watches, watcher.stats().skipped_roots) == (2, 1)
            shutil.rmtree(vanishing)
            await eventually(lambda: watcher.stats().watches == 1)
            await watcher.refresh()
            (workspace / "notes.txt").write_text("b\n")
            await eventually(lambda: pending(store, task))
    warnings = [(e["event"], e["workspace"]) for e in logs if e["log_level"] == "warning"]
    assert ("workspace does not exist; not watching it", str(gone.resolve())) in warnings
    assert ("workspace disappeared; no longer watching it", str(vanishing.resolve())) in warnings
    assert len(warnings) == 2


async def test_the_inotify_watch_limit_is_a_clear_warning_not_a_crash(store, workspace, data_dir, monkeypatch):
    class Full(watcher_module.Observer):
        def schedule(self, *args, **kwargs):
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(watcher_module, "Observer", Full)
    submit(store, workspace)
    with capture_logs() as logs:
        async with watching(store, data_dir, refresh_s=0.05) as watcher:
            await anyio.sleep(0.2)
            assert (watcher.stats().watches, watcher.stats().skipped_roots) == (0, 1)
    # Once, not at every refresh.
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert "inotify watch limit reached" in warning["event"]
    assert warning["workspace"] == str(workspace.resolve()) and "max_user_watches" in warning

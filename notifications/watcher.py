"""The file watcher: changes on disk to files a live task read or wrote become notifications on the queue."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

import anyio
import structlog
from anyio import from_thread, lowlevel, to_thread
from anyio.abc import TaskStatus
from watchdog.events import (
    DirDeletedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from notifications.queue import enqueue_async, new_notification
from store import EventStore
from store.events import NotificationEnqueued, TaskPhase
from store.state import Artifact, TaskSummary

# structlog itself: runtime configures it, and notifications sits below runtime.
log = structlog.stdlib.get_logger("agentd.watcher")

MAX_DELAY_S = 2.0
"""A burst that never goes quiet is still described this long after its first event."""
REFRESH_S = 2.0
"""How often the set of live tasks, and so of watched folders, is read again."""

# Content changes only: opening or reading a file (the agent's own read_file among them) is not news.
# DirDeletedEvent is there to notice a watched folder itself going away.
EVENT_FILTER = [
    FileCreatedEvent, FileModifiedEvent, FileAttribEvent, FileClosedEvent, FileDeletedEvent, FileMovedEvent,
    DirDeletedEvent,
]
EVENT_KINDS = {"created": "created", "modified": "modified", "closed": "modified", "attrib": "modified",
               "deleted": "deleted"}

EDITOR_TEMP_SUFFIXES = (".swp", ".swo", ".swx", "~")
EDITOR_TEMP_NAMES = frozenset({"4913"})  # vim's probe file, written and removed before every save

HASH_CHUNK = 1 << 20


class FileState(NamedTuple):
    """A path as it is on disk now: a regular file with its size and digest, or nothing."""

    exists: bool
    size: int | None = None
    sha256: str | None = None


GONE = FileState(False)


class _Told(NamedTuple):
    """What this watcher last told a task about one path, and the artifact record it was news against."""

    artifact_seq: int
    exists: bool
    sha256: str | None


@dataclass
class _Overflow:
    """Changes past the cap under one watched root: counted, and narrowed to the folder they share."""

    events: int
    under: str


@dataclass
class _Batch:
    changes: dict[str, str] = field(default_factory=dict)
    overflow: dict[str, _Overflow] = field(default_factory=dict)


@dataclass(frozen=True)
class WatcherStats:
    watches: int
    skipped_roots: int
    pending_paths: int
    pending_peak: int
    events_seen: int
    events_ignored: int
    events_coalesced: int
    events_overflowed: int
    flushes: int
    notifications_enqueued: int


class WorkspaceWatcher:
    """Watches the workspace of every unfinished task and enqueues what changed in files they touched.

    watchdog's thread only records path → last event kind, in a dict of at most `max_pending_paths`
    entries; the async side waits for `debounce_s` of quiet (at most `MAX_DELAY_S` after a burst's first
    event), then describes each path's final state to each task that read or wrote it, in one append.
    """

    def __init__(
        self,
        store: EventStore,
        *,
        data_dir: Path,
        debounce_s: float = 0.3,
        max_pending_paths: int = 10_000,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self.store = store
        self.data_dir = os.path.realpath(data_dir)
        self.debounce_s = debounce_s
        self.max_pending_paths = max_pending_paths
        self.refresh_s = refresh_s

        # Shared with watchdog's thread.
        self._lock = threading.Lock()
        self._batch = _Batch()
        self._first_event_at = self._last_event_at = 0.0
        self._dead_roots: set[str] = set()
        self._counts = dict.fromkeys(("seen", "ignored", "coalesced", "overflowed", "peak"), 0)

        # The async side's own.
        self._token: lowlevel.EventLoopToken | None = None
        self._wakeup = anyio.Event()
        self._root_gone = anyio.Event()
        self._refresh_lock = anyio.Lock()
        self._observer: BaseObserver | None = None
        self._watches: dict[str, ObservedWatch] = {}
        self._skipped: set[str] = set()
        self._told: dict[tuple[str, str], _Told] = {}
        self._flushes = 0
        self._enqueued = 0

    # -- running -----------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch until cancelled; `task_group.start(watcher.run)` returns once the first watches are set."""
        self._token = lowlevel.current_token()
        self._wakeup = anyio.Event()
        self._root_gone = anyio.Event()
        observer = Observer()
        observer.start()
        self._observer = observer
        try:
            await self.refresh()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._refresh_periodically)
                task_status.started()
                await self._flush_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(self._stop_observer)

    async def refresh(self) -> None:
        """Read which tasks are live again, and watch exactly the folders they work in."""
        if self._observer is None:
            return  # not running: `run` reads them when it starts
        async with self._refresh_lock:
            roots = await to_thread.run_sync(self._wanted_roots)
            await to_thread.run_sync(self._reconcile, roots)

    def stats(self) -> WatcherStats:
        with self._lock:
            c = dict(self._counts)
            pending = len(self._batch.changes)
        return WatcherStats(
            watches=len(self._watches), skipped_roots=len(self._skipped), pending_paths=pending,
            pending_peak=c["peak"], events_seen=c["seen"], events_ignored=c["ignored"],
            events_coalesced=c["coalesced"], events_overflowed=c["overflowed"], flushes=self._flushes,
            notifications_enqueued=self._enqueued,
        )

    async def _refresh_periodically(self) -> None:
        while True:
            # A watched folder that went away stopped its watch: look again at once, not at the next tick.
            with anyio.move_on_after(self.refresh_s):
                await self._root_gone.wait()
            self._root_gone = anyio.Event()
            try:
                await self.refresh()
            except Exception:
                log.exception("watcher refresh failed; keeping the current watches")

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        self._token = None
        if observer is not None:
            observer.stop()
            observer.join()
        self._watches.clear()

    # -- which folders -----------------------------------------------------------------------------

    def _wanted_roots(self) -> set[str]:
        return set(_outermost({s.workspace for s in _live(self.store)}))

    def _reconcile(self, wanted: set[str]) -> None:
        if self._observer is None:
            return
        with self._lock:
            dead, self._dead_roots = self._dead_roots, set()
        for root in list(self._watches):
            if root in wanted and root not in dead and os.path.isdir(root):
                continue
            self._observer.unschedule(self._watches.pop(root))
            if root in wanted and not os.path.isdir(root):
                log.warning("workspace disappeared; no longer watching it", workspace=root)
                self._skipped.add(root)
        for root in sorted(wanted - self._watches.keys()):
            self._watch(root)
        self._skipped &= wanted

    def _watch(self, root: str) -> None:
        # Warn once per folder, not at every refresh.
        first_time = root not in self._skipped
        self._skipped.add(root)
        if not os.path.isdir(root):
            if first_time:
                log.warning("workspace does not exist; not watching it", workspace=root)
            return
        try:
            assert self._observer is not None
            watch = self._observer.schedule(_Handler(self, root), root, recursive=True, event_filter=EVENT_FILTER)
        except OSError as e:
            if first_time:
                _warn_unwatchable(root, e)
            return
        self._watches[root] = watch
        self._skipped.discard(root)

    # -- watchdog's thread ---------------------------------------------------------------------------

    def _record(self, root: str, event: FileSystemEvent) -> None:
        if event.is_directory:
            if event.event_type == "deleted" and event.src_path == root:
                with self._lock:
                    self._dead_roots.add(root)
                self._call_soon(lambda: self._root_gone.set())
            return
        if event.event_type == "moved":
            changes = [(os.fsdecode(event.src_path), "deleted"), (os.fsdecode(event.dest_path), "created")]
        elif event.event_type in EVENT_KINDS:
            changes = [(os.fsdecode(event.src_path), EVENT_KINDS[event.event_type])]
        else:
            return
        wake = False
        now = time.monotonic()
        with self._lock:
            for path, kind in changes:
                wake = self._keep(root, path, kind, now) or wake
        if wake:
            self._call_soon(lambda: self._wakeup.set())

    def _call_soon(self, fn: Callable[[], object]) -> None:
        """Run `fn` on the event loop (the events it sets belong to it); nothing once it has stopped."""
        token = self._token
        if token is None:
            return
        try:
            from_thread.run_sync(fn, token=token)
        except anyio.RunFinishedError:
            pass

    def _keep(self, root: str, path: str, kind: str, now: float) -> bool:
        """Record one change (the lock is held); True if it starts a new burst."""
        c = self._counts
        c["seen"] += 1
        if self._ignored(path):
            # Not even the debounce hears of it: the store's own writes in a data folder inside a
            # workspace would otherwise keep every burst from going quiet.
            c["ignored"] += 1
            return False
        batch = self._batch
        starts = not batch.changes and not batch.overflow
        if path in batch.changes:
            c["coalesced"] += 1
            batch.changes[path] = kind
        elif len(batch.changes) < self.max_pending_paths:
            batch.changes[path] = kind
            c["peak"] = max(c["peak"], len(batch.changes))
        else:
            c["overflowed"] += 1
            folder = os.path.dirname(path)
            spill = batch.overflow.get(root)
            if spill is None:
                batch.overflow[root] = _Overflow(1, folder)
            else:
                spill.events += 1
                spill.under = os.path.commonpath((spill.under, folder))
        if starts:
            self._first_event_at = now
        self._last_event_at = now
        return starts

    def _ignored(self, path: str) -> bool:
        if _under(path, self.data_dir):
            return True
        name = os.path.basename(path)
        return name in EDITOR_TEMP_NAMES or name.startswith(".#") or name.endswith(EDITOR_TEMP_SUFFIXES)

    # -- the async side ------------------------------------------------------------------------------

    async def _flush_forever(self) -> None:
        while True:
            await self._wakeup.wait()
            # Replaced before anything else awaits, so a wake-up for the next burst is never lost.
            self._wakeup = anyio.Event()
            await self._settle()
            batch = self._take()
            try:
                await self._flush(batch)
            except Exception:
                log.exception("watcher could not describe file changes", paths=len(batch.changes))

    async def _settle(self) -> None:
        """Wait for `debounce_s` of quiet, or until the burst is `MAX_DELAY_S` old."""
        while True:
            with self._lock:
                deadline = min(self._last_event_at + self.debounce_s, self._first_event_at + MAX_DELAY_S)
            wait = deadline - time.monotonic()
            if wait <= 0:
                return
            await anyio.sleep(wait)

    def _take(self) -> _Batch:
        with self._lock:
            batch, self._batch = self._batch, _Batch()
        return batch

    async def _flush(self, batch: _Batch) -> None:
        notes, told = await to_thread.run_sync(self._describe, batch)
        if notes:
            # One append per flush: the writer commits the whole batch at once.
            await enqueue_async(self.store, notes)
            self._told.update(told)
            self._enqueued += len(notes)
        self._flushes += 1

    def _describe(self, batch: _Batch) -> tuple[list[NotificationEnqueued], dict[tuple[str, str], _Told]]:
        """The notifications a batch comes to, read against the store as it is now (a worker thread)."""
        live = _live(self.store)
        self._forget_finished({s.task_id for s in live})
        files: dict[str, FileState | None] = {}
        notes: list[NotificationEnqueued] = []
        told: dict[tuple[str, str], _Told] = {}
        for summary in live:
            ws = summary.workspace
            paths = [p for p in batch.changes if _under(p, ws)]
            spills = [(d, o.events) for o in batch.overflow.values() if (d := _overlap(o.under, ws)) is not None]
            if not paths and not spills:
                continue
            state = self.store.task(summary.task_id)
            if state is None:
                continue
            latest = _latest_by_path(state.artifacts)
            for path in paths:
                rel = Path(os.path.relpath(path, ws)).as_posix()
                record = latest.get(rel)
                if record is None:
                    continue
                if path not in files:
                    files[path] = _file_state(path)
                made = self._news(summary.task_id, rel, record, files[path], batch.changes[path])
                if made is not None:
                    notes.append(made[0])
                    told[(summary.task_id, rel)] = made[1]
            for folder, events in spills:
                # Only a folder holding something the task touched can have changed what it knows.
                rel_folder = Path(os.path.relpath(folder, ws)).as_posix()
                if _touched_under(latest, rel_folder):
                    notes.append(_overflow_note(summary.task_id, rel_folder, events))
        return notes, told

    def _news(
        self, task_id: str, rel: str, record: Artifact, final: FileState | None, last_event: str,
    ) -> tuple[NotificationEnqueued, _Told] | None:
        """A notification if `final` is not what the task believes about `rel`, with what it will then believe."""
        if final is None:
            return None
        believed = self._believed(task_id, rel, record)
        if (final.exists, final.sha256) == believed:
            # Its own write, a save without changes, a touch: the content the task knows is on disk.
            return None
        kind, text = _change_text(rel, record, final, believed_exists=believed[0])
        note = new_notification(
            source="file_watcher", kind=kind, tasks=[task_id], text=text, dedupe_key=f"file:{rel}",
            payload={"path": rel, "exists": final.exists, "size": final.size, "sha256": final.sha256,
                     "last_event": last_event, "same_as_recorded": _same_as_recorded(record, final)},
        )
        return note, _Told(record.seq, final.exists, final.sha256)

    def _believed(self, task_id: str, rel: str, record: Artifact) -> tuple[bool, str | None]:
        """What the task takes to be on disk: what it last recorded, or what it was told since."""
        told = self._told.get((task_id, rel))
        if told is not None and told.artifact_seq >= record.seq:
            return told.exists, told.sha256
        return record.operation != "delete", record.sha256

    def _forget_finished(self, live: set[str]) -> None:
        for key in [k for k in self._told if k[0] not in live]:
            del self._told[key]


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: WorkspaceWatcher, root: str) -> None:
        self.watcher = watcher
        self.root = root

    def on_any_event(self, event: FileSystemEvent) -> None:
        self.watcher._record(self.root, event)


# -- pure helpers -------------------------------------------------------------------------------------


def _live(store: EventStore) -> list[TaskSummary]:
    return [s for s in store.tasks() if not TaskPhase(s.phase).finished]


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _outermost(folders: set[str]) -> list[str]:
    """The folders not inside another one: a recursive watch on those sees all of them."""
    kept: list[str] = []
    for folder in sorted(folders, key=len):
        if not any(_under(folder, k) for k in kept):
            kept.append(folder)
    return kept


def _overlap(spilled: str, ws: str) -> str | None:
    """The part of a workspace that overflowed changes may have touched: a folder in it, or all of it."""
    if _under(spilled, ws):
        return spilled
    if _under(ws, spilled):
        return ws
    return None


def _latest_by_path(artifacts: Sequence[Artifact]) -> dict[str, Artifact]:
    latest: dict[str, Artifact] = {}
    for a in sorted(artifacts, key=lambda a: a.seq):
        latest[a.path] = a
    return latest


def _touched_under(latest: dict[str, Artifact], rel_folder: str) -> bool:
    if rel_folder == ".":
        return bool(latest)
    return any(p.startswith(rel_folder + "/") for p in latest)


def _file_state(path: str) -> FileState | None:
    """The path's content now; None when it cannot be read (no permission), so nothing is claimed."""
    try:
        # Not following a symlink, and not blocking on a FIFO: only a regular file has content to report.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return GONE
    except OSError as e:
        if e.errno == errno.ELOOP:
            return GONE
        log.debug("cannot read changed file", path=path, error=str(e))
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return GONE
        digest = hashlib.sha256()
        size = 0
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return FileState(True, size, digest.hexdigest())


def _same_as_recorded(record: Artifact, final: FileState) -> bool:
    if not final.exists:
        return record.operation == "delete"
    return record.operation != "delete" and final.sha256 == record.sha256


def _change_text(rel: str, record: Artifact, final: FileState, *, believed_exists: bool) -> tuple[str, str]:
    verb = "wrote" if record.operation == "write" else "read"
    if not final.exists:
        if record.operation == "delete":
            return "file_deleted", f"{rel} was deleted on disk again, as this task had left it"
        return "file_deleted", f"{rel} was deleted on disk; this task last {verb} it"
    assert final.size is not None and final.sha256 is not None
    what = "modified" if believed_exists else "created"
    facts = f"{_bytes(final.size)}, sha256 {final.sha256[:12]}…"
    if record.operation == "delete":
        return "file_changed", f"{rel} was {what} on disk: {facts}; this task had deleted it"
    if final.sha256 == record.sha256:
        return "file_changed", f"{rel} was {what} on disk: {facts}, the same content this task last {verb}"
    return "file_changed", f"{rel} was {what} on disk: {facts}, not the content this task last {verb}"


def _overflow_note(task_id: str, rel_folder: str, events: int) -> NotificationEnqueued:
    where = "the workspace" if rel_folder == "." else f"{rel_folder}/"
    return new_notification(
        source="file_watcher", kind="files_changed", tasks=[task_id], dedupe_key=f"files-under:{rel_folder}",
        text=f"many files changed under {where} ({events:,} more changes than are described one by one); "
             "read again any file this task relies on",
        payload={"dir": rel_folder, "events": events},
    )


def _bytes(n: int) -> str:
    return "1 byte" if n == 1 else f"{n:,} bytes"


def _warn_unwatchable(root: str, e: OSError) -> None:
    if e.errno == errno.ENOSPC:
        log.warning(
            "inotify watch limit reached; not watching this workspace (raise fs.inotify.max_user_watches)",
            workspace=root, max_user_watches=_proc_limit("max_user_watches"),
        )
    elif e.errno == errno.EMFILE:
        log.warning(
            "inotify instance limit reached; not watching this workspace (raise fs.inotify.max_user_instances)",
            workspace=root, max_user_instances=_proc_limit("max_user_instances"),
        )
    elif e.errno == errno.ENOENT:
        log.warning("workspace does not exist; not watching it", workspace=root)
    else:
        log.warning("cannot watch workspace", workspace=root, error=str(e))


def _proc_limit(name: str) -> int | None:
    try:
        return int(Path("/proc/sys/fs/inotify", name).read_text())
    except (OSError, ValueError):
        return None

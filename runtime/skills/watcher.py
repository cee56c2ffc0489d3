"""The catalog watcher: skills added, changed or removed on disk become a notification to running tasks.

A running task keeps the catalog it was pinned to (its prefix, and so the model's cached state, must
not change under it), but it should know that the skills folder changed: the notification names what
changed, and new tasks see the new catalog from their first request. Changes made while agentd was
down are told at start, to each running task whose pinned catalog differs from the folder's, once.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

import anyio
from anyio import to_thread
from anyio.abc import TaskStatus
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from notifications.queue import enqueue_async, new_notification
from runtime import logs
from runtime.skills import activation, catalog
from store import EventStore
from store.events import NotificationEnqueued, SkillCatalogPinned, TaskPhase
from store.queries.notifications import sent

log = logs.get_logger("agentd.catalog_watcher")

DEBOUNCE_S = 0.5
"""Quiet time after the last change before the folders are read again: a copy of a skill is many events."""
ROOTS_S = 2.0
"""How often a skills folder that did not exist is looked for again."""
DEDUPE_KEY = "skill_catalog"
NAMES_SHOWN = 10


class CatalogWatcher:
    def __init__(self, store: EventStore, roots: Sequence[Path], *, debounce_s: float = DEBOUNCE_S) -> None:
        self.store = store
        self.roots = tuple(Path(os.path.realpath(r)) for r in roots)
        self.debounce_s = debounce_s
        self._last: catalog.Catalog | None = None
        self._lock = threading.Lock()
        self._changed_at: float | None = None
        self._watches: dict[Path, ObservedWatch] = {}
        self.notified = 0

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch until cancelled; `task_group.start(watcher.run)` returns once the folders are watched."""
        self._last = await to_thread.run_sync(catalog.discover, self.roots)
        log.info("skills loaded", skills=len(self._last.skills), skipped=len(self._last.skipped))
        _report(self._last)
        caught_up = await to_thread.run_sync(self._since_pinned, self._last)
        if caught_up:
            await enqueue_async(self.store, caught_up)
            self.notified += len(caught_up)
        observer = Observer()
        observer.start()
        try:
            await to_thread.run_sync(self._watch_roots, observer)
            task_status.started()
            looked_for_roots = time.monotonic()
            while True:
                await anyio.sleep(self.debounce_s / 4)
                if time.monotonic() - looked_for_roots > ROOTS_S:
                    looked_for_roots = time.monotonic()
                    if await to_thread.run_sync(self._watch_roots, observer):
                        self._mark()
                if self._quiet_since_change():
                    try:
                        await self.check()
                    except Exception:  # noqa: BLE001  a failed look (a locked database, say) is retried at the next change
                        log.exception("skill catalog check failed")
        finally:
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(_stop, observer)

    async def check(self) -> NotificationEnqueued | None:
        """Read the skills folders; if the catalog changed, tell every task that has one pinned."""
        found = await to_thread.run_sync(catalog.discover, self.roots)
        before, self._last = self._last, found
        if before is None or before.fingerprint == found.fingerprint:
            return None
        _report(found)
        live = await to_thread.run_sync(self._running_tasks)
        log.info("skill catalog changed", skills=len(found.skills), tasks=len(live))
        if not live:
            return None
        notification = notice(live, hashes(before), found)
        await enqueue_async(self.store, [notification])
        self.notified += 1
        return notification

    def _since_pinned(self, found: catalog.Catalog) -> list[NotificationEnqueued]:
        """For each running task whose pinned catalog is not what the folders hold now, and that was
        not told of this catalog already (before a restart, say), what changed since it started."""
        told = self._told_fingerprints()
        news = []
        for task_id in self._running_tasks():
            pinned = activation.pinned_catalog(self.store.read_stream(task_id))
            if pinned is None or found.fingerprint in (pinned.fingerprint, told.get(task_id)):
                continue
            news.append(notice([task_id], pinned_hashes(pinned), found))
        return news

    def _told_fingerprints(self) -> dict[str, str]:
        """The catalog fingerprint each task was last told of, from the queue's own tables."""
        with self.store.reading() as conn:
            # In enqueue order, so each task keeps the latest it was told.
            return {s.task_id: s.payload.get("fingerprint") for s in sent(conn, "skill_catalog")}

    def _running_tasks(self) -> list[str]:
        # A submitted task has not pinned a catalog yet: it will see the new one, nothing to tell.
        waiting = {TaskPhase.RUNNING.value, TaskPhase.AWAITING_APPROVAL.value}
        return [s.task_id for s in self.store.tasks() if s.phase in waiting]

    def _mark(self) -> None:
        with self._lock:
            self._changed_at = time.monotonic()

    def _quiet_since_change(self) -> bool:
        with self._lock:
            if self._changed_at is None or time.monotonic() - self._changed_at < self.debounce_s:
                return False
            self._changed_at = None
            return True

    def _watch_roots(self, observer: BaseObserver) -> bool:
        """Watch each skills folder that exists and is not watched yet; True if one was added."""
        added = False
        for root in self.roots:
            if root in self._watches or not root.is_dir():
                continue
            try:
                self._watches[root] = observer.schedule(_Handler(self), str(root), recursive=True)
                added = True
            except OSError as e:
                log.warning("cannot watch skills folder", folder=str(root), error=e.strerror)
        return added


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: CatalogWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        # Opening and reading SKILL.md (every activation does) is not a change.
        if event.event_type not in ("opened", "closed_no_write"):
            self.watcher._mark()


def _report(found: catalog.Catalog) -> None:
    """A skill found but not loaded is said in the log (and by `agentd skills list`), never dropped quietly."""
    for d in found.skipped:
        log.warning("skill not loaded", diagnostic=str(d))
    for d in found.warnings:
        log.warning("skill warning", diagnostic=str(d))


def _stop(observer: BaseObserver) -> None:
    observer.stop()
    observer.join()


def notice(tasks: list[str], before: Mapping[str, str | None], found: catalog.Catalog) -> NotificationEnqueued:
    """The notification telling `tasks` what changed from `before` (name -> SKILL.md hash) to `found`."""
    added = sorted(found.skills.keys() - before.keys())
    removed = sorted(before.keys() - found.skills.keys())
    changed = sorted(
        name
        for name, h in before.items()
        if h is not None and name in found.skills and found.skills[name].content_hash != h
    )
    return new_notification(
        source="skill_catalog",
        kind="catalog_changed",
        tasks=tasks,
        text=describe(added, removed, changed),
        payload={"added": added, "removed": removed, "changed": changed, "fingerprint": found.fingerprint},
        # Several edits before a task's next call are one notification: the catalog as it is now.
        dedupe_key=DEDUPE_KEY,
    )


def hashes(found: catalog.Catalog) -> dict[str, str | None]:
    return {name: s.content_hash for name, s in found.skills.items()}


def pinned_hashes(pinned: SkillCatalogPinned) -> dict[str, str | None]:
    """What a task was pinned to; a skill left out of its catalog has no hash to compare, so None."""
    return {**dict.fromkeys(pinned.left_out), **{e.name: e.content_hash for e in pinned.entries}}


def describe(added: list[str], removed: list[str], changed: list[str]) -> str:
    parts = [
        f"{what} {_names(names)}"
        for what, names in (("added", added), ("removed", removed), ("changed", changed))
        if names
    ]
    return (
        f"The installed skills changed ({'; '.join(parts) or 'descriptions only'}). This task keeps the skill "
        "catalog it started with; new tasks see the new one."
    )


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")

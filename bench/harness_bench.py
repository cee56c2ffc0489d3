"""Benchmark of the harness: file change → notification latency, drain cost per model call, memory in a burst.

Three parts, each on temporary folders and a fresh SQLite store (WAL, synchronous=full):

    1. latency   a file the task read is rewritten --changes times, one at a time; the time from the
                 write's close to the NotificationEnqueued record being committed (polling the store's
                 last seq), median and p99, at the default debounce (0.3 s) and at 0.05 s
    2. drain     what one model call pays to admit what is pending for its task: queue.pending +
                 queue.drain + appending NotificationsAdmitted, with 0, 10 and 1,000 pending (and
                 1,000 saves of 10 files, which coalesce), plus the tokens of the resulting block
    3. memory    tracemalloc peak and RSS change of a running watcher while 10,000 file events happen
                 over N distinct files, each case in a fresh process

It prints the figures and writes bench/results/harness.json. Timings are reported, never asserted.
See bench/README.md ("Harness").

    python bench/harness_bench.py               # 200 changes per debounce setting; about 2 minutes
    python bench/harness_bench.py --quick       # 40 changes, 3 drain rounds: a smoke run
    python bench/harness_bench.py --no-tokens   # without loading the model to count tokens
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from notifications import queue
from notifications.watcher import WorkspaceWatcher
from provenance import save, version
from runtime.agent import context
from runtime.harness.tasks import submit_task
from store import EventStore
from store.events import NOTIFICATIONS_STREAM, ArtifactRead, NotificationsAdmitted

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "results" / "harness.json"
EVENTS_IN_BURST = 10_000
MEMORY_CASES = ((100, 10_000), (10_000, 10_000), (10_000, 1_000))  # (distinct files, max_pending_paths)


# -- shared --------------------------------------------------------------------------------------------


def new_task(store: EventStore, ws: Path, *reads: str) -> str:
    task_id = "t-bench"
    store.append(task_id, submit_task("watch the files", ws), expected_version=0)
    for rel in reads:
        data = (ws / rel).read_bytes()
        store.append(task_id, [ArtifactRead(path=rel, sha256=hashlib.sha256(data).hexdigest(), size=len(data))])
    return task_id


def open_store(folder: Path) -> EventStore:
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    return EventStore(f"sqlite:///{data / 'agentd.db'}")


async def until(probe: Callable[[], bool], timeout: float = 30.0, step: float = 0.0005) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError("the watcher did not get there in time")
        await anyio.sleep(step)


def percentile(values: list[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if len(values) > 1 else values[0]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# -- 1. latency ----------------------------------------------------------------------------------------


async def latency(debounce_s: float, changes: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp)) as store:
        ws = Path(tmp, "ws")
        ws.mkdir()
        notes = ws / "notes.txt"
        notes.write_text("version 0\n" * 100)
        task = new_task(store, ws, "notes.txt")
        watcher = WorkspaceWatcher(store, data_dir=Path(tmp, "data"), debounce_s=debounce_s)
        samples: list[float] = []
        async with anyio.create_task_group() as tg:
            await tg.start(watcher.run)
            for i in range(1, changes + 1):
                before = store.last_seq()
                notes.write_text(f"version {i}\n" * 100)  # opens, writes, closes
                written = time.perf_counter()
                await until(lambda before=before: store.last_seq() > before)
                samples.append(time.perf_counter() - written)
            tg.cancel_scope.cancel()
        with store.reading() as conn:
            waiting = len(queue.pending(conn, task))
    return {
        "debounce_s": debounce_s, "changes": changes, "notifications": waiting,
        "median_ms": ms(statistics.median(samples)), "p99_ms": ms(percentile(samples, 99)),
        "min_ms": ms(min(samples)), "max_ms": ms(max(samples)),
        "over_debounce_median_ms": ms(statistics.median(samples) - debounce_s),
    }


# -- 2. drain ------------------------------------------------------------------------------------------


def drain_case(pending: int, paths: int, rounds: int, count: Callable[[str], int] | None) -> dict:
    phases: dict[str, list[float]] = {"pending": [], "drain": [], "admit": [], "total": []}
    admitted = 0
    block_text = ""
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp)) as store:
            ws = Path(tmp, "ws")
            ws.mkdir()
            task = new_task(store, ws)
            if pending:
                store.append(NOTIFICATIONS_STREAM, [file_note(task, n % paths, n) for n in range(pending)])
            t0 = time.perf_counter()
            with store.reading() as conn:
                waiting = queue.pending(conn, task)
            t1 = time.perf_counter()
            items = queue.drain(waiting)
            t2 = time.perf_counter()
            if items:
                store.append(task, [NotificationsAdmitted(call_index=1, items=items)], expected_version=1)
            t3 = time.perf_counter()
        for name, value in (("pending", t1 - t0), ("drain", t2 - t1), ("admit", t3 - t2), ("total", t3 - t0)):
            phases[name].append(value)
        admitted = len(items)
        if items:
            block_text = context.notifications_block(NotificationsAdmitted(call_index=1, items=items)).render()
    result = {
        "pending": pending, "distinct_paths": paths if pending else 0, "admitted": admitted, "rounds": rounds,
        **{f"{name}_ms": ms(statistics.median(values)) for name, values in phases.items()},
        "block_chars": len(block_text),
    }
    if count is not None:
        result["block_tokens"] = count(block_text) if block_text else 0
    return result


def file_note(task: str, path: int, n: int):
    digest = hashlib.sha256(f"{path}:{n}".encode()).hexdigest()
    rel = f"src/module_{path:04}.py"
    text = f"{rel} was modified on disk: {1000 + n:,} bytes, sha256 {digest[:12]}…, not the content this task last read"
    return queue.new_notification(
        source="file_watcher", kind="file_changed", tasks=[task], dedupe_key=f"file:{rel}", text=text,
        payload={"path": rel, "exists": True, "size": 1000 + n, "sha256": digest},
    )


def token_counter(enabled: bool) -> tuple[Callable[[str], int] | None, str | None]:
    if not enabled:
        return None, None
    try:
        from runtime.inference.local import LocalModel
        from runtime.inference.model_file import smoke_model_path

        model = LocalModel(smoke_model_path(), kv_cache_bytes=0)
    except Exception as e:  # the model is optional here: the timings stand without it
        progress(f"not counting tokens: {e}")
        return None, None
    return model.count, model.name


# -- 3. memory -----------------------------------------------------------------------------------------


async def memory(files: int, cap: int) -> dict:
    """One burst, measured in this process (run it in a fresh one: see `memory_in_subprocess`)."""
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp)) as store:
        ws = Path(tmp, "ws")
        burst = ws / "burst"
        burst.mkdir(parents=True)
        paths = [burst / f"f{i:05}.txt" for i in range(files)]
        for p in paths:
            p.write_text("x\n")
        new_task(store, ws, "burst/f00000.txt")
        watcher = WorkspaceWatcher(store, data_dir=Path(tmp, "data"), max_pending_paths=cap)
        async with anyio.create_task_group() as tg:
            await tg.start(watcher.run)
            gc.collect()
            rss_before = rss_kib()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            started = time.perf_counter()
            seen, flushes = watcher.stats().events_seen, watcher.stats().flushes
            # One inotify event per call (an attribute change): 10,000 events in all.
            for round_ in range(EVENTS_IN_BURST // files):
                for p in paths:
                    os.utime(p, (round_, round_))
            generated = time.perf_counter()
            await until(lambda: watcher.stats().events_seen >= seen + EVENTS_IN_BURST, step=0.005)
            await until(lambda: watcher.stats().flushes > flushes and watcher.stats().pending_paths == 0, step=0.005)
            described = time.perf_counter()
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rss_after = rss_kib()
            stats = watcher.stats()
            tg.cancel_scope.cancel()
    return {
        "files": files, "events": EVENTS_IN_BURST, "max_pending_paths": cap,
        "tracemalloc_peak_kib": round((peak - base) / 1024, 1),
        "rss_delta_kib": rss_after - rss_before if rss_before and rss_after else None,
        "pending_peak": stats.pending_peak, "events_seen": stats.events_seen,
        "events_coalesced": stats.events_coalesced, "events_overflowed": stats.events_overflowed,
        "notifications": stats.notifications_enqueued,
        "generate_s": round(generated - started, 3), "until_described_s": round(described - started, 3),
    }


def memory_in_subprocess(files: int, cap: int) -> dict:
    # A fresh interpreter per case: RSS would otherwise reuse what an earlier case freed.
    out = subprocess.run(
        [sys.executable, __file__, "--memory-case", str(files), str(cap)],
        capture_output=True, text=True, check=True, timeout=300,
    )
    return json.loads(out.stdout)


def rss_kib() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


# -- the run -------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=200, help="file changes per debounce setting (default 200)")
    ap.add_argument("--debounce", type=float, nargs="+", default=[0.3, 0.05], help="debounce settings, seconds")
    ap.add_argument("--drain-rounds", type=int, default=7, help="fresh stores per drain case (default 7)")
    ap.add_argument("--quick", action="store_true", help="40 changes, 3 drain rounds")
    ap.add_argument("--no-tokens", action="store_true", help="do not load the bundled model to count tokens")
    ap.add_argument("--json", default=str(DEFAULT_JSON))
    ap.add_argument("--memory-case", nargs=2, type=int, metavar=("FILES", "CAP"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.changes, args.drain_rounds = 40, 3
    return args


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the figures."""
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def render(results: dict) -> str:
    lines = ["File change → notification enqueued (write closed → NotificationEnqueued committed)"]
    for r in results["latency"]:
        lines.append(
            f"  debounce {r['debounce_s']:.2f} s: median {r['median_ms']:8.1f} ms   p99 {r['p99_ms']:8.1f} ms   "
            f"min {r['min_ms']:7.1f}   max {r['max_ms']:7.1f}   "
            f"over the debounce (median) {r['over_debounce_median_ms']:6.1f} ms   ({r['changes']} changes)"
        )
    lines += ["", "Drain cost per model call (pending + drain + NotificationsAdmitted append, median)"]
    for r in results["drain"]:
        tokens = f"   block {r['block_tokens']:6,} tokens" if "block_tokens" in r else ""
        lines.append(
            f"  {r['pending']:5,} pending ({r['distinct_paths']:4,} paths) → {r['admitted']:5,} admitted: "
            f"total {r['total_ms']:7.2f} ms (pending {r['pending_ms']:.2f}, drain {r['drain_ms']:.2f}, "
            f"append {r['admit_ms']:.2f})   block {r['block_chars']:7,} chars{tokens}"
        )
    lines += ["", f"Memory during a burst of {EVENTS_IN_BURST:,} file events (watcher running, tracemalloc)"]
    for r in results["memory"]:
        rss = f"{r['rss_delta_kib']:7,} KiB" if r["rss_delta_kib"] is not None else "n/a"
        lines.append(
            f"  {r['files']:6,} files, cap {r['max_pending_paths']:6,}: peak {r['tracemalloc_peak_kib']:9,.1f} KiB   "
            f"RSS +{rss}   pending peak {r['pending_peak']:6,}   overflowed {r['events_overflowed']:6,}   "
            f"notifications {r['notifications']}   described after {r['until_described_s']:.2f} s"
        )
    return "\n".join(lines)


def describe_run(args: argparse.Namespace, model: str | None) -> dict:
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "changes": args.changes, "debounce_s": args.debounce, "drain_rounds": args.drain_rounds,
        "token_model": model, "cpus": os.cpu_count(), "machine": platform.platform(),
        "python": platform.python_version(), "watchdog": version("watchdog"), "anyio": version("anyio"),
    }




def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.memory_case:
        print(json.dumps(anyio.run(memory, *args.memory_case)))
        return 0
    results: dict[str, list[dict]] = {"memory": [], "latency": [], "drain": []}
    for files, cap in MEMORY_CASES:
        progress(f"memory: {EVENTS_IN_BURST:,} events over {files:,} files, cap {cap:,}")
        results["memory"].append(memory_in_subprocess(files, cap))
    for debounce in args.debounce:
        progress(f"latency: {args.changes} changes at debounce {debounce} s")
        results["latency"].append(anyio.run(latency, debounce, args.changes))
    count, model = token_counter(not args.no_tokens)
    for pending, paths in ((0, 1), (10, 10), (1000, 1000), (1000, 10)):
        progress(f"drain: {pending} pending over {paths} paths")
        results["drain"].append(drain_case(pending, paths, args.drain_rounds, count))
    meta = describe_run(args, model)
    print(render(results))
    save(args.json, meta, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

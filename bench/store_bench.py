"""Benchmark of agentd's event store against LangGraph's SqliteSaver and eventsourcing's SQLite recorder.

For each size N (default 100,000 and 1,000,000 events), in one run on one machine, each system in a
temporary folder of its own, with durable settings (WAL, synchronous=full):

    agentd         fill to N in appends of 1000 events (figure 3), in --rounds slices, each followed by
                   raw sqlite3 inserting the rows it wrote (the ceiling of 3); database size per
                   event (5); projection rebuild and verify over the N-event log (4)
    LangGraph      fill to N checkpoints (untimed)
    eventsourcing  fill to N in insert_events calls of 1000 (7, batched)

then, with every store full and open, the per-commit figures, split into --rounds interleaved rounds so
that the disk's good and bad moments fall on every system alike:

    agentd         --ops sequential one-event appends (1); 4 x --ops one-event appends from 16 threads
                   and from 16 asyncio tasks, with the mean number of appends per commit (2)
    LangGraph      --ops sequential puts, 4 x --ops puts from 16 threads (6)
    eventsourcing  --ops single-event inserts (7)
    raw sqlite3    --ops one-row commits: the disk's fsync ceiling, for reference

It prints a table with the targets marked "met" or "not met" and writes bench/results/store.json.
Timings are reported, never asserted. See bench/README.md for what each figure means.

    python bench/store_bench.py                 # N = 100,000 and 1,000,000 (several minutes)
    python bench/store_bench.py --quick         # N = 20,000, fewer ops: a smoke run
    python bench/store_bench.py --sizes 200000 --ops 2000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sqlite3
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import agentd_cases
import anchors
import report
from provenance import git, save, version
from store.eventstore import EventStore
from timing import SYNCHRONOUS_NAMES, Rate, RawCommits
from workload import MIX, EventPool

HERE = Path(__file__).resolve().parent
DEFAULT_SIZES = (100_000, 1_000_000)
DEFAULT_OPS = 5_000
QUICK_SIZE = 20_000
QUICK_OPS = 1_000
DEFAULT_ROUNDS = 5
CONCURRENT_FACTOR = 4
"""The concurrent measurements make this many times --ops appends (or puts), spread over 16 writers."""


STEP_EVENTS = 4
"""Events in one agent step of the workload (ModelCalled, ToolCallProposed, ToolCallExecuted, ArtifactRead)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(str(n) for n in DEFAULT_SIZES),
                   help="comma-separated event counts to fill each store to (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: size {QUICK_SIZE:,} only and --ops {QUICK_OPS:,} unless given")
    p.add_argument("--ops", type=int, default=None,
                   help=f"operations per sequential per-commit measurement (default {DEFAULT_OPS:,}); "
                        f"the 16-writer measurements make {CONCURRENT_FACTOR} times as many")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                   help="interleaved rounds the per-commit figures are split into (default: %(default)s)")
    p.add_argument("--no-verify", action="store_true", help="skip replay.verify (the rebuild is still measured)")
    p.add_argument("--no-anchors", action="store_true", help="measure agentd only")
    p.add_argument("--json", default=str(HERE / "results" / "store.json"), help="where to write the results")
    args = p.parse_args(argv)
    args.sizes = [QUICK_SIZE] if args.quick else [int(s.replace("_", "")) for s in args.sizes.split(",")]
    if args.ops is None:
        args.ops = QUICK_OPS if args.quick else DEFAULT_OPS
    args.concurrent_ops = CONCURRENT_FACTOR * args.ops
    if args.rounds < 1 or args.concurrent_ops // args.rounds < agentd_cases.WRITERS:
        p.error(f"--ops {args.ops} is too few to split into {args.rounds} rounds of {agentd_cases.WRITERS} writers")
    return args


def progress(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the table."""
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- per-commit figures, interleaved ------------------------------------------------------------------


class Rounds:
    """One per-commit figure, taken a slice at a time in several rounds; the total is their sum."""

    def __init__(self) -> None:
        self.rates: list[Rate] = []
        self.commits = 0
        self.group_commit = False

    def add(self, result: Rate | agentd_cases.GroupCommit) -> None:
        if isinstance(result, agentd_cases.GroupCommit):
            self.group_commit = True
            self.commits += result.commits
            result = result.rate
        self.rates.append(result)

    def as_dict(self) -> dict:
        total = Rate(sum(r.count for r in self.rates), sum(r.seconds for r in self.rates))
        per_round = [r.per_second for r in self.rates]
        out = {**total.as_dict(), "rounds": [round(x, 1) for x in per_round],
               "min": round(min(per_round), 1), "max": round(max(per_round), 1)}
        if self.group_commit:
            out["commits"] = self.commits
            out["mean_batch"] = round(total.count / self.commits, 2) if self.commits else None
        return out


def per_commit_cases(store: EventStore, unsynced: EventStore, pool: EventPool, lg, es, raw, args) -> list[tuple]:
    """(system, figure, operations per round, function of the operation count) for every per-commit figure."""
    ops = args.ops // args.rounds
    concurrent = args.concurrent_ops // args.rounds
    cases = [
        ("agentd", "single", ops, lambda n: agentd_cases.single_appends(store, pool, n)),
        ("agentd", "concurrent16", concurrent, lambda n: agentd_cases.concurrent_appends(store, pool, n)),
        ("agentd", "concurrent16_async", concurrent, lambda n: agentd_cases.concurrent_appends_async(store, pool, n)),
        ("agentd", "concurrent16_unsynced", concurrent, lambda n: agentd_cases.concurrent_appends(unsynced, pool, n)),
        ("agentd", "concurrent16_steps", concurrent,
         lambda n: agentd_cases.concurrent_appends(store, pool, n, events_per_append=STEP_EVENTS)),
        ("raw_sqlite", "single_commit", ops, raw.single),
    ]
    if lg is not None:
        cases += [("langgraph", "single", ops, lg.single), ("langgraph", "threads16", concurrent, lg.threads)]
    if es is not None:
        cases += [("eventsourcing", "single", ops, es.single)]
    return cases


def run_per_commit(cases: list[tuple], rounds: int) -> dict[tuple[str, str], dict]:
    """Each round runs a slice of every figure, starting one case later each time, so that a slow spell of
    the disk or the CPU falls on all systems alike instead of on whichever ran at that moment."""
    totals = {(system, figure): Rounds() for system, figure, _, _ in cases}
    for r in range(rounds):
        progress(f"per-commit round {r + 1} of {rounds}")
        k = r % len(cases)
        for system, figure, ops, measure in cases[k:] + cases[:k]:
            totals[(system, figure)].add(measure(ops))
    return {key: t.as_dict() for key, t in totals.items()}


# -- one size -----------------------------------------------------------------------------------------


def writer_settings(store: EventStore) -> dict:
    """The PRAGMAs of the writer's own connection, read in the writer's thread."""

    def read(conn) -> dict:
        sync = conn.exec_driver_sql("PRAGMA synchronous").scalar()
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        return {"synchronous": SYNCHRONOUS_NAMES.get(sync, str(sync)), "journal_mode": str(mode).lower()}

    return store.in_write_transaction(read)


def batched_beside_raw(store: EventStore, raw: RawCommits, pool: EventPool, n: int, rounds: int) -> tuple[dict, dict]:
    """agentd's fill to `n` (3) and raw sqlite3 inserting the same rows (its ceiling), a slice of each in turn.

    The two are compared as a ratio, so they are taken side by side, as the per-commit figures are: a spell
    of load on the machine falls on both, not on whichever happened to run then. Each slice is whole
    appends of BATCH events; raw sqlite3 then inserts the rows that slice wrote, read back untimed.
    """
    agentd, plain = Rounds(), Rounds()
    per_round = max(1, -(-n // (rounds * agentd_cases.BATCH))) * agentd_cases.BATCH
    written = 0
    while written < n:
        size = min(per_round, n - written)
        agentd.add(agentd_cases.fill(store, pool, size))
        ddl, rows = agentd_cases.log_rows(store, written + size)
        plain.add(raw.event_rows(ddl if written == 0 else [], rows[written:]))
        written += size
    return agentd.as_dict(), plain.as_dict()


def agentd_once(
    store: EventStore, raw: RawCommits, pool: EventPool, folder: str, n: int, args: argparse.Namespace
) -> tuple[dict, dict]:
    """The agentd figures taken once: fill (3) beside raw sqlite3's event rows, size (5), rebuild and
    verify (4). Returns them and raw sqlite3's event rows figure."""
    out: dict = {"settings": writer_settings(store)}
    progress(f"agentd: filling to {n:,} events in appends of {agentd_cases.BATCH}, and raw sqlite3 inserting the "
             f"same rows, in {args.rounds} interleaved rounds")
    out["batched"], event_rows = batched_beside_raw(store, raw, pool, n, args.rounds)
    size = agentd_cases.size(store, n)
    out["size"] = {"bytes": size.total_bytes, "per_event": size.per_event,
                   "log_per_event": size.log_per_event, "by_table": size.by_table}
    progress("agentd: rebuilding the projections from the log")
    replayed = agentd_cases.rebuild(store, folder)
    out["rebuild"] = replayed.rebuild.as_dict()
    out["rebuild_wall"] = replayed.rebuild_wall.as_dict()
    progress("agentd: decoding the log alone (the bound on rebuild)")
    out["decode_only"] = agentd_cases.decode_only(store).as_dict()
    if not args.no_verify:
        progress("agentd: verifying the projections against the log")
        out["verify"] = agentd_cases.verify(store, folder).as_dict()
    return out, event_rows


def langgraph_once(lg: anchors.LangGraphBench, n: int) -> dict:
    progress(f"LangGraph: filling to {n:,} checkpoints (untimed)")
    lg.fill(n)
    size = lg.size_bytes()
    return {"settings": lg.settings, "size": {"bytes": size, "rows": n, "per_row": size / n},
            "checkpoint_blob_bytes": lg.checkpoint_bytes()}


def eventsourcing_once(es: anchors.EventsourcingBench, n: int) -> dict:
    progress(f"eventsourcing: filling to {n:,} events in batches of {anchors.BATCH}")
    batched = es.batched(n)
    size = es.size_bytes()
    return {"settings": es.settings, "batched": batched.as_dict(),
            "size": {"bytes": size, "rows": n, "per_row": size / n}}


def folder(stack: contextlib.ExitStack, system: str) -> str:
    """A temporary folder of the system's own, removed when `stack` closes."""
    return stack.enter_context(tempfile.TemporaryDirectory(prefix=f"agentd-bench-{system}-"))


def run_size(n: int, pool: EventPool, args: argparse.Namespace) -> dict:
    """Fill every system to `n` and take its one-off figures, then the per-commit figures in rounds."""
    progress(f"=== N = {n:,} ===")
    with contextlib.ExitStack() as stack:
        agentd_folder = folder(stack, "agentd")
        store = stack.enter_context(EventStore(agentd_cases.store_url(agentd_folder)))
        raw = stack.enter_context(RawCommits(folder(stack, "raw")))
        agentd, event_rows = agentd_once(store, raw, pool, agentd_folder, n, args)
        result = {"agentd": agentd, "raw_sqlite": {"settings": raw.settings, "event_rows": event_rows}}
        lg = es = None
        if not args.no_anchors:
            lg = stack.enter_context(anchors.LangGraphBench(folder(stack, "langgraph"), pool))
            result["langgraph"] = langgraph_once(lg, n)
            es = stack.enter_context(anchors.EventsourcingBench(folder(stack, "eventsourcing"), pool))
            result["eventsourcing"] = eventsourcing_once(es, n)
        progress(f"per-commit figures: {args.ops:,} sequential and {args.concurrent_ops:,} concurrent "
                 f"operations per system, in {args.rounds} interleaved rounds")
        # The same 16 writers on a store that never waits for the disk: what the CPU alone allows them.
        unsynced = stack.enter_context(
            EventStore(agentd_cases.store_url(folder(stack, "agentd-unsynced")), synchronous="off")
        )
        cases = per_commit_cases(store, unsynced, pool, lg, es, raw, args)
        for (system, figure), figures in run_per_commit(cases, args.rounds).items():
            result[system][figure] = figures
    result["targets"] = report.check_targets(result)
    return result


# -- the run ------------------------------------------------------------------------------------------


def describe_run(args: argparse.Namespace) -> dict:
    return {
        "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "argv": sys.argv[1:],
        "sizes": args.sizes,
        "ops": args.ops,
        "concurrent_ops": args.concurrent_ops,
        "rounds": args.rounds,
        "writers": agentd_cases.WRITERS,
        "batch": agentd_cases.BATCH,
        "event_mix": ["TaskSubmitted", *MIX],
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "packages": {name: version(name) for name in
                     ("agentd", "sqlalchemy", "langgraph-checkpoint-sqlite", "langgraph-checkpoint", "eventsourcing")},
        "git_commit": git(["rev-parse", "HEAD"]),
        "store_uncommitted_changes": git(["status", "--porcelain", "--", ":/store"]),
    }






def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    meta = describe_run(args)
    pool = EventPool()
    results = {str(n): run_size(n, pool, args) for n in args.sizes}
    print(report.render(meta, results))
    save(args.json, meta, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where the writer spends its time: cProfile of agentd's writer thread for one benchmark case.

The writer commits in a thread of its own, which a profiler started in the main thread never sees. This
script wraps `Writer._commit` (at run time, in this process only; the store's code is not changed) so
that each commit runs under one `cProfile.Profile`, for the chosen case only, after an untimed fill.

    python bench/profile_store.py batched            # appends of 1000 events, as the fill does
    python bench/profile_store.py concurrent         # 16 threads appending one event per call
    python bench/profile_store.py single --ops 2000  # one event per commit, one appender
    python bench/profile_store.py rebuild            # replay.rebuild_into (runs in the main thread)

It prints the top functions by own time and by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile

import agentd_cases
from store import writer
from store.eventstore import EventStore
from workload import EventPool

CASES = ("batched", "single", "concurrent", "rebuild")


class WriterProfiler:
    """Runs every `Writer._commit` under one profiler while `active` is set."""

    def __init__(self) -> None:
        self.profile = cProfile.Profile()
        self.active = False
        original = writer.Writer._commit

        def profiled_commit(writer_self, batch):
            if not self.active:
                return original(writer_self, batch)
            self.profile.enable()
            try:
                return original(writer_self, batch)
            finally:
                self.profile.disable()

        writer.Writer._commit = profiled_commit


def run_case(case: str, store: EventStore, pool: EventPool, folder: str, ops: int, prof: WriterProfiler):
    if case == "rebuild":
        main_thread = cProfile.Profile()
        main_thread.enable()
        result = agentd_cases.rebuild(store, folder).rebuild
        main_thread.disable()
        return result, main_thread
    prof.active = True
    if case == "batched":
        result = agentd_cases.fill(store, pool, ops)
    elif case == "single":
        result = agentd_cases.single_appends(store, pool, ops)
    else:
        result = agentd_cases.concurrent_appends(store, pool, ops).rate
    prof.active = False
    return result, prof.profile


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("case", choices=CASES)
    p.add_argument("--fill", type=int, default=100_000, help="events in the store before the case (untimed)")
    p.add_argument("--ops", type=int, default=None, help="appends (events for 'batched'); default depends on case")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    ops = args.ops or {"batched": 100_000, "single": 2_000, "concurrent": 8_000, "rebuild": 0}[args.case]

    prof = WriterProfiler()
    pool = EventPool()
    with tempfile.TemporaryDirectory(prefix="agentd-profile-") as folder:
        with EventStore(agentd_cases.store_url(folder)) as store:
            agentd_cases.fill(store, pool, args.fill)
            rate, profile = run_case(args.case, store, pool, folder, ops, prof)
    print(f"{args.case}: {rate.count:,} in {rate.seconds:.2f} s = {rate.per_second:,.0f}/s (under the profiler)\n")
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()

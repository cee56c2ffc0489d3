"""Benchmark of change recording: what a workspace snapshot costs before and after a call that may change files.

On a generated workspace of --files text files (--size bytes each, in nested folders), timed in one run:

    cold     the first whole-workspace snapshot: every file read, hashed and put in the artifact store
    warm     the next one after nothing changed: a walk of stat calls, nothing read
    changed  the next one after a command rewrote --touch files: only those read again
    path     a file tool's snapshot of the one file its path names

Each figure is the median of --rounds, in milliseconds, beside the cold one as a ratio. Timings are
reported, never asserted: see bench/README.md.

    python bench/changes_bench.py                  # 5,000 files of 2 KB
    python bench/changes_bench.py --files 20000    # the recording bound
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.artifacts import ArtifactStore
from runtime.tools import ToolContext
from runtime.tools.snapshot import Limit, changes, take


def workspace(root: Path, files: int, size: int) -> list[str]:
    names = []
    for i in range(files):
        path = root / f"d{i % 20}" / f"e{i % 7}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((f"line {i}\n" * (size // 8 + 1)).encode()[:size])
        names.append(path.relative_to(root).as_posix())
    return names


def timed(fn, *args, **kw):
    """(milliseconds, result) of one call."""
    started = time.perf_counter()
    result = fn(*args, **kw)
    return (time.perf_counter() - started) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--touch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    limit = Limit(max_files=max(args.files * 2, Limit().max_files), max_bytes=Limit().max_bytes)
    cold, warm, changed, path = [], [], [], []
    for _ in range(args.rounds):
        scratch = Path(tempfile.mkdtemp(prefix="changes-bench-"))
        try:
            ws = scratch / "ws"
            names = workspace(ws, args.files, args.size)
            ctx = ToolContext(task_id="t", tenant="t", actor="bench", workspace=ws,
                              artifacts=ArtifactStore(scratch / "artifacts"))
            took, first = timed(take, ctx, limit=limit)
            cold.append(took)
            # Past the racy window, as a snapshot a few seconds after the last write is.
            time.sleep(2.1)
            took, second = timed(take, ctx, previous=first, limit=limit)
            warm.append(took)
            for name in names[: args.touch]:
                (ws / name).write_text("rewritten\n")
            took, third = timed(take, ctx, previous=second, limit=limit)
            changed.append(took)
            assert len(changes(second, third, "c1")) == args.touch
            path.append(timed(take, ctx, (names[-1],), previous=third, limit=limit)[0])
        finally:
            shutil.rmtree(scratch)
    base = statistics.median(cold)
    print(f"workspace: {args.files} files of {args.size} bytes; {args.rounds} rounds; medians")
    print(f"{'snapshot':<10} {'ms':>10} {'x cold':>8}")
    for label, figures in (("cold", cold), ("warm", warm), ("changed", changed), ("path", path)):
        m = statistics.median(figures)
        print(f"{label:<10} {m:>10.1f} {m / base:>8.3f}")


if __name__ == "__main__":
    main()

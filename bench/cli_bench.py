"""How fast agentd's command line answers: `agentd --help`, `agentd task list` and `agentd status` on an
empty data directory, each the median of N runs, next to `python -c pass` in the same run.

A command is a fresh process, so this is mostly import time: what a command imports that it does
not use (the daemon, uvicorn, alembic, llama_cpp) is paid on every call. Target on the project's
2-core machine: at most 0.5 s for each read-only command.

    .venv/bin/python bench/cli_bench.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "agentd --help": [sys.executable, "-m", "runtime.cli", "--help"],
    "agentd task list": [sys.executable, "-m", "runtime.cli", "task", "list"],
    "agentd status": [sys.executable, "-m", "runtime.cli", "status"],
}


def median_seconds(argv: list[str], runs: int, env: dict[str, str], cwd: Path) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv[2:]) or argv[0]} failed: {done.stderr.decode()[-500:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        env.update(AGENTD_DATA_DIR=str(Path(tmp) / "data"), PYTHONPATH=str(REPO))
        # The first command creates the (empty) database, so every timed run finds it there.
        subprocess.run(COMMANDS["agentd task list"], env=env, cwd=tmp, capture_output=True, check=True)
        results = {name: median_seconds(argv, args.runs, env, Path(tmp)) for name, argv in COMMANDS.items()}
    base = results["python -c pass"]
    # Other processes on a 2-core machine move every figure; the ratios to `python -c pass` move less.
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"median of {args.runs} runs, {os.cpu_count()} CPUs, load average {load}")
    print(f"{'command':<20} {'seconds':>8} {'x python -c pass':>17}")
    for name, seconds in results.items():
        print(f"{name:<20} {seconds:>8.3f} {seconds / base:>17.1f}")


if __name__ == "__main__":
    main()

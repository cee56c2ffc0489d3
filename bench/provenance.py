"""What a benchmark ran on: package versions and the code's commit, recorded beside its figures."""

from __future__ import annotations

import json
import subprocess
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent


def version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git(args: list[str]) -> str | None:
    """The benchmarked code's commit, and whether it had uncommitted changes when it ran."""
    try:
        out = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return out.stdout.strip() or None


def save(path: str | Path, meta: dict, results: dict) -> None:
    """Write a run's figures with what it ran on, and say where."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    print(f"\nresults written to {out}")

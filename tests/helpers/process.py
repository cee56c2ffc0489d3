"""Processes a test started, watched from /proc."""

from __future__ import annotations

import time
from pathlib import Path


def process_gone(pid: int, within: float = 3.0) -> bool:
    """True once `pid` has exited (a zombie counts: it runs nothing)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False

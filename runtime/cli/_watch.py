"""What `agentd task run` shows while a decision runs: a line per decision, a live status line on a terminal."""

from __future__ import annotations

import shutil
import threading
from typing import TextIO

from runtime.agent.progress import Progress, describe, line

BAR_WIDTH = 24


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = width if total <= 0 else min(width, done * width // total)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _stage_begins(p: Progress) -> str:
    """A stage as a plain line says it once, when it begins: no counts that will be stale at once."""
    if p.stage == "evaluating":
        return f"evaluating a prompt of {p.total:,} tokens, {p.done:,} of them cached"
    if p.stage == "generating":
        return f"generating (at most {p.total:,} tokens)"
    return describe(p)


class Watch:
    """A `Reporter` that draws decisions on `stream` (stderr, so stdout keeps only the outcome).

    Each decision's start and outcome is a line of its own. In between, on a terminal, one status
    line is redrawn in place (`\\r`): the prompt evaluation with a bar, the generation counter, the
    tool running. Anywhere else (a pipe, a log file) there are no bars and no redraws: a plain line
    when the stage changes. Reports arrive from the model's thread too, hence the lock.
    """

    def __init__(self, stream: TextIO, *, tty: bool | None = None) -> None:
        self._stream = stream
        self._tty = stream.isatty() if tty is None else tty
        self._lock = threading.Lock()
        self._live = 0  # characters of the status line now on screen
        self._stage: tuple[int, str] | None = None

    def __call__(self, p: Progress) -> None:
        with self._lock:
            if p.stage in ("deciding", "decided"):
                self._print(line(p))
            elif self._tty:
                status = describe(p)
                if p.stage == "evaluating":
                    status += " " + bar(p.done, p.total)
                self._redraw(status)
            elif self._stage != (p.step, p.stage):
                self._print(f"step {p.step}: {_stage_begins(p)}")
            self._stage = (p.step, p.stage)

    def note(self, text: str) -> None:
        """A line of the command's own between the decisions' lines (what Ctrl-C is waiting for)."""
        with self._lock:
            self._print(text)

    def close(self) -> None:
        """Take the status line away, so what is printed next starts on a clean line."""
        with self._lock:
            self._redraw("")

    def _print(self, text: str) -> None:
        self._redraw("")
        self._stream.write(text + "\n")
        self._stream.flush()

    def _redraw(self, text: str) -> None:
        if not self._tty or (not text and not self._live):
            return
        # Wider than the terminal would wrap, and `\r` only returns to the start of the last row.
        text = text[: max(1, shutil.get_terminal_size().columns - 1)]
        self._stream.write("\r" + text.ljust(self._live) + ("\r" if not text else ""))
        self._stream.flush()
        self._live = len(text)

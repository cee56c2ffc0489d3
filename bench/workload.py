"""The events the benchmark writes: realistic task streams, built once before any clock starts.

A task stream starts with `TaskSubmitted`, then repeats one agent step of four events:

    ModelCalled -> ToolCallProposed -> ToolCallExecuted -> ArtifactRead

so every step updates the `tasks` row (steps, tokens), adds a `task_actions` row (the executed call)
and an `artifacts` row (the file read, with a valid sha256). Payload sizes are those of a small agent:
a one-line model output, a path argument, a short observation.

Events are immutable, so the benchmark builds a pool of them up front and cycles through it; what is
timed is the store, not pydantic constructing the events.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Iterator

from store.events import (
    ArtifactRead,
    Event,
    ModelCalled,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
)

MIX = ("ModelCalled", "ToolCallProposed", "ToolCallExecuted", "ArtifactRead")
"""The repeating step, in order; README.md names it too."""

POOL_STEPS = 1024
"""Distinct steps in the pool (4 events each); enough that payloads vary from commit to commit."""

MODEL = "qwen2.5-coder-7b-instruct-q4_k_m"


def task_submitted(n: int) -> TaskSubmitted:
    return TaskSubmitted(
        goal=f"Fix the failing date parsing in module {n} and add a regression test",
        workspace=f"workspaces/bench-{n % 16}",
        max_steps=100_000,
        max_tokens=2_000_000_000,
    )


def step_events(i: int) -> list[Event]:
    """One agent step: the model proposes reading a file, the tool reads it, the read is recorded."""
    path = f"src/app/module_{i % 97}/parser_{i % 13}.py"
    call_id = f"call-{i:06d}"
    content = f"# file {path}, revision {i}\n".encode() * 40
    return [
        ModelCalled(
            call_index=i + 1,
            model=MODEL,
            prompt_tokens=1800 + i % 400,
            completion_tokens=60 + i % 90,
            cached_tokens=1500,
            output=f'{{"tool": "read_file", "arguments": {{"path": "{path}"}}}}',
        ),
        ToolCallProposed(
            call_id=call_id,
            tool="read_file",
            arguments={"path": path},
            reason="Read the parser before changing it.",
        ),
        ToolCallExecuted(
            call_id=call_id,
            tool="read_file",
            status="ok",
            observation={"bytes": len(content), "lines": 40, "head": content[:80].decode()},
        ),
        ArtifactRead(path=path, sha256=hashlib.sha256(content).hexdigest(), size=len(content)),
    ]


class EventPool:
    """Pre-built step events, handed out in order and endlessly."""

    def __init__(self, steps: int = POOL_STEPS) -> None:
        self.events: list[Event] = [e for i in range(steps) for e in step_events(i)]

    def stream(self, offset: int = 0) -> Iterator[Event]:
        """An endless iterator over the pool; `offset` starts different appenders at different events."""
        start = (offset * 4) % len(self.events)
        return itertools.islice(self._rounds(), start, None)

    def _rounds(self) -> Iterator[Event]:
        # The store refuses a call id proposed twice in a task: each round past the first renames its calls.
        yield from self.events
        for n in itertools.count(1):
            for e in self.events:
                yield e.model_copy(update={"call_id": f"{e.call_id}-{n}"}) if hasattr(e, "call_id") else e

    def take(self, it: Iterator[Event], n: int) -> list[Event]:
        return list(itertools.islice(it, n))


def payload_bytes(events: list[Event]) -> list[bytes]:
    """The same events as JSON bytes, for the anchors that store opaque payloads."""
    return [e.model_dump_json().encode() for e in events]

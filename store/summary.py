"""A task's own fields, one row of the `tasks` table: what the fold keeps and what `task list` reads.

On its own, with no event classes behind it, so that a command that only lists tasks need not load them.
"""

from __future__ import annotations

from typing import NamedTuple


class TaskSummary(NamedTuple):
    """The task's own fields: one row of the `tasks` table."""

    task_id: str
    goal: str
    workspace: str
    tenant: str
    phase: str
    max_steps: int
    max_tokens: int
    steps: int
    tokens_used: int
    test_status: str | None
    submitted_at: str
    updated_at: str
    finished_at: str | None
    version: int
    last_seq: int

"""What an unfinished task is doing now, for `agentd task show`, in the words its page uses."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from runtime.cli._daemon import deciding, served, unserved
from store.events import ModelCalled, Recorded, TaskPhase
from store.state import TaskState

# Phases in which the task waits for a runner to take its next decision, not for a person.
RUNNABLE = (TaskPhase.SUBMITTED, TaskPhase.RUNNING)


def now(data_dir: Path, state: TaskState, records: Sequence[Recorded]) -> str | None:
    """The stage a serving agentd is at in the task's decision, as the page shows it live; else what the
    page says between decisions, with the last decision's outcome read from the log. None once finished."""
    # Imported only for a task that has not finished: they bring the agent loop (not the model).
    from runtime.agent.loop import decided_line
    from runtime.web.views import now as page_now

    shown = page_now(state.summary, None)
    if shown is None:
        return None
    live = deciding(data_dir, state.summary.task_id)
    if live is not None:
        return live
    said = shown.idle
    steps = [r.event.call_index for r in records if isinstance(r.event, ModelCalled)]
    if steps:
        said += f" (after step {steps[-1]}: {decided_line(records, steps[-1])})"
    if TaskPhase(state.summary.phase) in RUNNABLE and not served(data_dir):
        said += f"; {unserved(data_dir, state.summary.task_id)}"
    return said

"""Eval cases as a run meets them: their files laid out, and the events of a run that did what they ask."""

from __future__ import annotations

from pathlib import Path

from runtime.eval.case import Case
from store.events import (
    AnswerGiven,
    ModelCalled,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
)


def lay_out_case(case: Case, scratch: Path) -> Path:
    """An eval case's files in `scratch/workspace`, as a run lays them out."""
    workspace = scratch / "workspace"
    for name, text in case.files.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text, encoding="utf-8")
    return workspace


def recorded_run(case: Case, answer: str, *, ran: bool = True) -> list:
    """The events of a run that ran the case's required tools (the first of each list) and answered."""
    tools = [item if isinstance(item, str) else item[0] for item in case.required_tools] if ran else []
    events: list = [TaskSubmitted(goal=case.input, workspace="/w", max_steps=case.step_cap),
                    TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="started")]
    for i, name in enumerate(tools, start=1):
        events += [_model_called(i), ToolCallProposed(call_id=f"c{i}", tool=name),
                   ToolCallExecuted(call_id=f"c{i}", tool=name, status="ok")]
    events += [_model_called(len(tools) + 1), AnswerGiven(answer=answer),
               TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason="answered")]
    return events


def _model_called(step: int) -> ModelCalled:
    return ModelCalled(call_index=step, attempt=1, model="m", prompt_tokens=100, completion_tokens=10, output="{}")

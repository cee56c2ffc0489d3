"""Events of a decision: the model was called, a tool call was proposed and executed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from store.events._base import Event


class ModelCalled(Event):
    call_index: int = Field(ge=1)
    model: str
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    cached_tokens: int = Field(0, ge=0)
    output: str = ""


class ToolCallProposed(Event):
    call_id: str
    tool: str
    arguments: dict[str, Any] = {}
    reason: str = ""


class ToolCallExecuted(Event):
    call_id: str
    tool: str
    status: Literal["ok", "error"]
    observation: dict[str, Any] = {}
    artifact_ref: str | None = None

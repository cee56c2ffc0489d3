"""Events of Agent Skills in a task: the catalog it was shown, and each skill whose instructions it took in."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from store.events._base import Event


class CatalogEntry(BaseModel):
    """One skill as the catalog showed it: the description possibly shortened to fit the budget."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    description: str
    content_hash: str
    folder: str
    shortened: bool = False


class SkillCatalogPinned(Event):
    """The skill catalog of a task, fixed before its first request and kept to its end.

    A catalog that changed on disk applies to the next task: editing this one's would change its
    prefix and throw away the model's cached state for it. Recorded in full so that replay shows the
    task the catalog it saw, whatever the skills folder holds by then.
    """

    entries: tuple[CatalogEntry, ...] = ()
    fingerprint: str
    budget_tokens: int = Field(ge=0)
    # Skills found that did not fit even without their descriptions.
    left_out: tuple[str, ...] = ()


class SkillActivated(Event):
    """A skill's instructions entered the task: the body as it was read, so every later request
    shows exactly this text even if the SKILL.md changes or goes away."""

    call_index: int = Field(ge=0, description="the decision that asked for it; 0 for the user's /name in the goal")
    name: str
    content_hash: str
    folder: str
    body: str
    allowed_tools: tuple[str, ...] = ()
    by: Literal["model", "user"] = "model"


class SkillActivationFailed(Event):
    """A skill in the task's catalog could not be read when asked for (removed or broken since)."""

    call_index: int = Field(ge=0)
    name: str
    error: str

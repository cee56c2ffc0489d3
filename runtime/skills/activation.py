"""Skills in a task: the catalog it is pinned to, activating a skill, and what an active skill allows.

Progressive disclosure, as the Agent Skills format intends: a task's requests carry only the
catalog (names and descriptions) in their stable prefix; a skill's body enters the task when the
model proposes `activate_skill` (or the user's goal starts with `/name`), as an event that every
later request repeats; its files and script output come in only through the skill tools.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Mapping, Sequence

from runtime.skills import catalog, skill
from store.events import (
    LeftOut,
    Recorded,
    SkillActivated,
    SkillActivationFailed,
    SkillCatalogPinned,
)

# Offered to every task with skills in its catalog, subject to its allowed effects like any tool.
SKILL_TOOLS = ("read_skill_file", "run_skill_script")

_USER_SKILL = re.compile(r"\s*/([^\s/]+)")


def pin(roots: Sequence[Path], budget_tokens: int, count: Callable[[str], int]) -> SkillCatalogPinned:
    """The catalog a new task will see to its end: what the skills folders hold now, within budget."""
    found = catalog.discover(roots)
    # `count` measures a catalog text as the prompt will hold it, wrapper tags included (the agent's
    # catalog block), so that the block itself keeps to the budget.
    shown = catalog.entries(found, budget_tokens, count)
    shown_names = {e.name for e in shown}
    return SkillCatalogPinned(
        entries=tuple(shown),
        fingerprint=found.fingerprint,
        budget_tokens=budget_tokens,
        left_out=tuple(name for name in found.skills if name not in shown_names),
    )


def catalog_left_out(pinned: SkillCatalogPinned | None) -> list[LeftOut]:
    """What the manifest says of the catalog's budget: descriptions shortened, skills left out."""
    if pinned is None:
        return []
    shortened = [
        LeftOut(
            source=f"skill:{e.name}", kind="skill", tokens=0, reason="description shortened to fit the skill budget"
        )
        for e in pinned.entries
        if e.shortened
    ]
    dropped = [
        LeftOut(source=f"skill:{name}", kind="skill", tokens=0, reason="left out of the catalog: over the skill budget")
        for name in pinned.left_out
    ]
    return shortened + dropped


def pinned_catalog(records: Sequence[Recorded]) -> SkillCatalogPinned | None:
    return next((r.event for r in records if isinstance(r.event, SkillCatalogPinned)), None)


def active_skills(records: Sequence[Recorded]) -> dict[str, SkillActivated]:
    """The skills this task took in, by name, from its log."""
    return {r.event.name: r.event for r in records if isinstance(r.event, SkillActivated)}


def activate(
    pinned: SkillCatalogPinned, name: str, call_index: int, by: str = "model"
) -> SkillActivated | SkillActivationFailed:
    """Read the skill's body now, from the folder the catalog named; the event keeps the text."""
    entry = next((e for e in pinned.entries if e.name == name), None)
    if entry is None:
        return SkillActivationFailed(call_index=call_index, name=name, error="not in this task's catalog")
    loaded, diagnostics = skill.load(Path(entry.folder))
    if loaded is None:
        error = "; ".join(str(d) for d in diagnostics if d.severity == "error") or "it no longer loads"
        return SkillActivationFailed(call_index=call_index, name=name, error=error)
    return SkillActivated(
        call_index=call_index,
        name=name,
        content_hash=loaded.content_hash,
        folder=str(loaded.folder),
        body=loaded.body,
        allowed_tools=tuple(loaded.allowed_tools),
        by=by,
    )


def user_request(goal: str, pinned: SkillCatalogPinned | None) -> str | None:
    """The skill a goal asks for by starting with `/name`, when that name is in the catalog."""
    m = _USER_SKILL.match(goal)
    if m is None or pinned is None:
        return None
    name = m.group(1)
    return name if any(e.name == name for e in pinned.entries) else None


def pre_approver(active: Mapping[str, SkillActivated], tool: str) -> str | None:
    """The active skill whose `allowed-tools` lists `tool`, if any.

    Only ever consulted for a tool the task was already offered: allowed-tools spares the wait for a
    person, it never adds a tool or an effect the task's policy left out.
    """
    return next((name for name, e in sorted(active.items()) if tool in e.allowed_tools), None)

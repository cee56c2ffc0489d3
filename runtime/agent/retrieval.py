"""Retrieval for one decision: whether it searches the knowledge at all, and the few-shot examples it is shown."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from runtime.agent.context import EXAMPLE_PREFIX, Transcript
from runtime.agent.host import Runtime, Trusted
from runtime.agent.profiles import Profile
from runtime.knowledge import examples as examples_
from runtime.knowledge.base import folder_scope
from store.events import EvidenceItem, LeftOut

# Seed 000: two or three short examples, never one long one.
EXAMPLES_PER_DECISION = 3
EXAMPLE_BUDGET = 400
# As for evidence (request.py): an example must share more than a word with the decision at hand, and be
# close to the best match; a look-alike example is worse than none.
EXAMPLE_MIN_UTILITY = 0.2
EXAMPLE_MIN_SHARE = 0.5


def skipped(profile: Profile, transcript: Transcript, call_index: int, *, mcp: bool) -> str | None:
    """Why decision `call_index` searches no knowledge, or None where it searches.

    The rule, from recorded state only, so a replay and the manifest say the same as the run:
    - a profile that reads no scope, has no folder and no MCP server has nothing to search;
    - a decision whose query would repeat the previous decision's searches nothing new. The query is
      the goal and the latest read result (request.retrieve_evidence), so it is repeated when no read
      result came back since the previous decision. What shown evidence is excluded from such a search
      only leaves what ranked below it: measured on the support example's eight eval cases, a repeated
      goal-only search added the rate-limit or expired-key section in three of them, the two sections
      a revoked key was explained by wrongly when they were shown (the evidence weights' min_share).

    Deliberately not skipped: the decision right after a read result, and the last decision of a turn.
    Measured on the same cases, the search with the account's state found the section the answer needs
    (revoked keys) in two cases where the goal alone had not.
    """
    if not profile.knowledge_scopes and profile.knowledge is None and not mcp:
        return "the profile reads no knowledge"
    if call_index > 1 and (transcript.last_read is None or transcript.read_after < call_index - 1):
        return "no new read result since the previous decision, whose search this one would repeat"
    return None


def scopes_of(profile: Profile) -> list[str]:
    """The knowledge scopes a profile's tasks read: its listed ones and its own folder's."""
    return [*profile.knowledge_scopes, *([folder_scope(profile.knowledge)] if profile.knowledge is not None else [])]


def examples(
    rt: Runtime, trusted: Trusted, query: str, shown: set[str], offered: Sequence[str]
) -> tuple[tuple[EvidenceItem, ...], tuple[LeftOut, ...]]:
    """The few-shot examples for this decision, fenced as data under `example:<cite>` and shown best last;
    each one of another policy version than the profile's, or of a tool the task is not offered, left
    out with the reason before anything is ranked."""
    found = rt.knowledge_base.examples(query, tenant=trusted.tenant, scopes=scopes_of(trusted.profile))
    if not found:
        return (), ()
    chosen = examples_.select(
        found, query=query, tenant=trusted.tenant, policy_version=trusted.profile.version, offered=offered,
        exclude={s.removeprefix(EXAMPLE_PREFIX) for s in shown if s.startswith(EXAMPLE_PREFIX)},
        budget=EXAMPLE_BUDGET, limit=EXAMPLES_PER_DECISION, count=rt.model.count,
        min_utility=EXAMPLE_MIN_UTILITY, min_share=EXAMPLE_MIN_SHARE,
    )
    items = tuple(
        EvidenceItem(
            cite=EXAMPLE_PREFIX + c.section.cite,
            source="example",
            version=trusted.profile.version,
            sha256=hashlib.sha256(c.section.text.encode()).hexdigest(),
            text=c.section.text,
            utility=c.utility,
            tokens=c.tokens,
        )
        for c in reversed(chosen.shown)
    )
    left_out = tuple(
        LeftOut(source=EXAMPLE_PREFIX + cite, kind="evidence", tokens=tokens, reason=why)
        for cite, tokens, why in chosen.left_out
    )
    return items, left_out

"""Few-shot examples: short decisions stored like knowledge, shown only under the policy they are valid for.

An example is a Markdown file whose front matter says it is one and which policy version it was
written for; its text is the situation, then the correct decision and, best, the typical mistake:

    ---
    id: examples/rotate-for-another-account
    kind: example
    policy_version: 5d1c0e9a4b7f     (a profile's version: the `version` of its role block in a manifest)
    decision: escalate               (optional: the tool or action it illustrates)
    ---
    User: Rotate the key for account A-456. I am their admin.

    ## Correct

    {"action": "escalate", "reason": "rotation for another account needs verified admin approval"}

    ## Mistake

    {"action": "call_tool", "tool": "rotate_api_key", "arguments": {"account_id": "A-456"}}

Seed 000: an example helps where it shows a boundary, one right answer beside one typical wrong one;
two or three short ones, chosen for the decision at hand; and one that looks alike but belongs to
another policy is worse than none, so the policy version is checked before anything is ranked.
Pure: text in, checks, chunks and selections out; the knowledge base keeps the files and the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runtime.knowledge import evidence
from store.knowledge import Chunk

# What an example may illustrate besides a tool the task is offered.
ACTIONS = frozenset({"final_answer", "escalate"})
_PARTS = {"correct": "Right", "mistake": "Wrong"}


@dataclass(frozen=True)
class Example:
    cite: str
    doc_id: str
    version: str
    policy_version: str
    decision: str | None
    text: str
    tenants: frozenset[str]
    current: bool


@dataclass(frozen=True)
class Selected:
    shown: tuple[evidence.Scored, ...]
    left_out: tuple[tuple[str, int, str], ...]  # (cite, tokens, why)


def problem(text: str) -> str | None:
    """What keeps an example's text (after its front matter) from being shown, or None."""
    parts = {anchor: body for anchor, _, body in evidence.split_sections(text)}
    unknown = sorted(set(parts) - set(_PARTS))
    if unknown:
        return f"an example's sections are ## Correct and ## Mistake, not {', '.join(unknown)}"
    if not parts.get("correct"):
        return "an example needs a ## Correct section: the decision it shows"
    return None


def render(text: str) -> str:
    """The example as the model is shown it: the situation, then `Right:` and `Wrong:` as in seed 000."""
    situation = text.split("\n## ", 1)[0].strip() if not text.startswith("## ") else ""
    lines = [situation] if situation else []
    for anchor, _, body in evidence.split_sections(text):
        if body:
            lines.append(f"{_PARTS[anchor]}: {body}")
    return "\n".join(lines)


def chunks_of(doc_id: str, version: str, text: str, decision: str | None) -> list[Chunk]:
    """An example is one chunk, never cut: half of a right-and-wrong pair teaches nothing."""
    return [Chunk(f"{doc_id}@{version}", decision or "", render(text))]


def select(
    examples: Iterable[Example],
    *,
    query: str,
    tenant: str,
    policy_version: str,
    offered: Iterable[str],
    exclude: set[str],
    budget: int,
    limit: int,
    count: Callable[[str], int],
    min_utility: float,
    min_share: float,
) -> Selected:
    """The examples for a decision: those of another policy version, or of a tool the task is not
    offered, left out before anything is ranked; the rest ranked by relevance to `query` as evidence
    is (a superseded version stays out), packed within `limit` and `budget`."""
    available = ACTIONS | set(offered)
    left_out: list[tuple[str, int, str]] = []
    eligible: list[evidence.Section] = []
    for e in examples:
        if e.policy_version != policy_version:
            why = f"valid for policy version {e.policy_version}, not this task's {policy_version}"
            left_out.append((e.cite, count(e.text), why))
        elif e.decision is not None and e.decision not in available:
            left_out.append((e.cite, count(e.text), f"illustrates {e.decision}, which this task is not offered"))
        else:
            eligible.append(evidence.Section(
                cite=e.cite, doc_id=e.doc_id, version=e.version, title=e.decision or "", text=e.text,
                tenants=e.tenants, authority=1.0, current=e.current,
            ))
    packed = evidence.retrieve(
        eligible, tenant=tenant, query=query, exclude=exclude,
        budget=budget, limit=limit, count=count, min_utility=min_utility, min_share=min_share,
    )
    left_out += [(c.section.cite, c.tokens, why.replace("evidence budget", "example budget"))
                 for c, why in packed.left_out]
    return Selected(packed.selected, tuple(left_out))

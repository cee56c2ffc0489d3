"""Context policies: which of a task's history one request shows, and what it leaves out and why.

A policy is a pure function of the task's history and a measure of whether a request fits; it
returns the blocks to show and a `LeftOut` for everything it dropped or shortened, which the
manifest records. It never touches the stable prefix (instructions, tools, the skill catalogue), the
request itself, the task's trusted facts or the tail (task state and the decision asked for): those
are not history to choose from.

- `full`: the whole history (a task whose next request does not fit fails at the window).
- `window:K`: the last K steps (a step is the call the task made and its result), the rest dropped.
- `elide_tool_results:K`: results older than the last K replaced by a one-line pointer that says how
  to see them again.
- `compact`: `auto`, but before a request would fill TRIGGER of the budget, the older steps are
  replaced by a summary with fixed sections that a summarizer call writes (runtime.agent.compaction);
  the cut `auto` makes is the fallback when no summary could be written.
- `user_verbatim:K`: every message of the user's verbatim (as every policy keeps them), and the
  steps of the last K of them in full; the steps taken for older messages dropped.
- `auto` (the default): `full` while the request fits. When it would not, it cuts: the oldest
  results elided, then (if that is not enough) the oldest steps dropped, as few as bring the request
  under LOW_WATER of the budget, so that later steps have room to append. The cut is recorded
  (`ContextTrimmed`) and every later request makes the same one until that no longer fits: llama.cpp's
  prefix cache breaks once per cut, where the manifest says, not at every call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from runtime.agent.blocks import Block, call_of, step_calls
from runtime.policy_name import DEFAULT, KNOWN, NAMES, Policy, parse  # noqa: F401  (the names callers use here)
from store.events import LeftOut, ToolCallExecuted

# With `auto`, the results a request keeps whole however long the task runs: the model acts on the
# latest result, and often on the one before it (the file it read, then the listing it came from).
AUTO_KEEP_RESULTS = 2
# A new cut leaves the request at most this share of the budget: the room later steps append into
# before the next cut (and the next break of the prefix cache).
LOW_WATER = 0.5


class Cut(NamedTuple):
    """The oldest `elided` results shown as pointers, the oldest `dropped` steps left out."""

    elided: int = 0
    dropped: int = 0


@dataclass(frozen=True)
class Shown:
    entries: tuple[Block, ...]
    left_out: tuple[LeftOut, ...] = ()
    # Files whose content this request no longer shows: the task may read them again.
    unread: frozenset[str] = field(default_factory=frozenset)
    # Labels of the blocks dropped whole: what this request cannot cite.
    dropped: frozenset[str] = field(default_factory=frozenset)
    # With `auto`: the cut this request makes, and the tokens with the cut before it, where it is new.
    cut: Cut = Cut()
    new_cut_from: int | None = None


def apply(
    policy: Policy,
    entries: Sequence[Block],
    results: Mapping[str, ToolCallExecuted],
    measure: Callable[[Sequence[Block]], int],
    budget: int,
    count: Callable[[str], int],
    cut: Cut = Cut(),
    summary: tuple[frozenset[str], Block] | None = None,
) -> Shown:
    """The history one request shows under `policy`. `results` maps a result block's label to the
    event it shows; `measure` gives the tokens of a request with these history blocks; `cut` is the
    one `auto` recorded last; `summary` the steps the latest compaction replaced and its block."""
    steps = step_calls(entries)
    results_ = _results(entries)
    if policy.name == "full":
        return Shown(tuple(entries))
    if policy.name == "window":
        return _window(entries, len(steps) - (policy.k or 0), count, f"window:{policy.k}")
    if policy.name == "elide_tool_results":
        return _elide(entries, results, len(results_) - (policy.k or 0), count, f"elide_tool_results:{policy.k}")
    if policy.name == "user_verbatim":
        older = _steps_before_turn(entries, policy.k or 1)
        return _window(entries, len(older), count, f"user_verbatim:{policy.k}")
    if policy.name == "compact" and summary is not None:
        # The summary in place of the steps it replaced; then, if even that is too long (a failed or
        # not yet made compaction), the cut `auto` makes.
        summarized = _summarize(entries, *summary, count)
        shown = _auto(summarized.entries, results, measure, budget, count, cut)
        return Shown(
            shown.entries, (*summarized.left_out, *shown.left_out), summarized.unread | shown.unread,
            summarized.dropped | shown.dropped, shown.cut, shown.new_cut_from,
        )
    return _auto(entries, results, measure, budget, count, cut)


def _auto(
    entries: Sequence[Block],
    results: Mapping[str, ToolCallExecuted],
    measure: Callable[[Sequence[Block]], int],
    budget: int,
    count: Callable[[str], int],
    cut: Cut,
) -> Shown:
    steps, results_ = step_calls(entries), _results(entries)
    current = _cut(entries, results, cut, count)
    before = measure(current.entries)
    if before <= budget:
        return current
    # A new cut, as small as brings the request under the low-water mark: first elide, then drop.
    low = int(budget * LOW_WATER)
    elidable = max(len(results_) - AUTO_KEEP_RESULTS, cut.elided)
    n = _least(
        cut.elided, elidable, lambda n: measure(_cut(entries, results, Cut(n, cut.dropped), count).entries) <= low
    )
    if n is not None:
        chosen = Cut(n, cut.dropped)
    else:
        m = _least(cut.dropped, max(len(steps) - 1, cut.dropped),
                   lambda m: measure(_cut(entries, results, Cut(elidable, m), count).entries) <= low)
        # Even one step over the mark: keep one, and let assembly refuse if the task's state alone is too large.
        chosen = Cut(elidable, m if m is not None else max(len(steps) - 1, cut.dropped))
    shown = _cut(entries, results, chosen, count)
    return Shown(shown.entries, shown.left_out, shown.unread, shown.dropped, chosen, before)


def _summarize(entries: Sequence[Block], replaced: frozenset[str], summary: Block, count) -> Shown:
    """The summary where the first step it replaced was, and the replaced steps and results left out."""
    out: list[Block] = []
    left: list[LeftOut] = []
    unread: set[str] = set()
    placed = False
    for b in entries:
        if call_of(b) not in replaced:
            out.append(b)
            continue
        if not placed:
            out.append(summary)
            placed = True
        left.append(LeftOut(source=b.label, kind=b.kind, tokens=count(b.render()), reason="compact: in the summary"))
        if b.label.startswith("result:"):
            unread |= _paths(b)
    return Shown(tuple(out), tuple(left), frozenset(unread), frozenset(x.source for x in left))


def _least(low: int, high: int, ok: Callable[[int], bool]) -> int | None:
    """The least n in [low, high] with ok(n), for ok monotone (false, ..., false, true, ...); None if none."""
    if low > high or not ok(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if ok(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _cut(entries: Sequence[Block], results: Mapping[str, ToolCallExecuted], cut: Cut, count) -> Shown:
    """`cut` applied to the whole history: steps dropped first, then results elided, both counted from
    the oldest over the whole history, so that the same cut is the same blocks at every later step."""
    if cut == Cut():
        return Shown(tuple(entries))
    reason = "auto: the whole history no longer fits the window"
    all_results = _results(entries)
    windowed = _window(entries, cut.dropped, count, reason)
    gone = set(all_results[: cut.elided])
    elided = _elide(windowed.entries, results, sum(1 for r in _results(windowed.entries) if r in gone), count, reason)
    return Shown(elided.entries, (*windowed.left_out, *elided.left_out), windowed.unread | elided.unread,
                 windowed.dropped, cut)


def _steps_before_turn(entries: Sequence[Block], k: int) -> list[str]:
    """The steps taken before the user's K-th latest message (the goal is the first message)."""
    starts = [i for i, b in enumerate(entries) if b.label == "request" or b.label.startswith("request:")]
    if len(starts) <= k:
        return []
    return step_calls(entries[: starts[-k]])


def _results(entries: Sequence[Block]) -> list[str]:
    """The labels of the results shown whole, in order."""
    return [b.label for b in entries if b.label.startswith("result:") and not _is_pointer(b)]


def _window(entries: Sequence[Block], drop: int, count, reason: str) -> Shown:
    """Without the oldest `drop` steps (each a call and its result)."""
    dropped = set(step_calls(entries)[: max(drop, 0)])
    kept: list[Block] = []
    left: list[LeftOut] = []
    unread: set[str] = set()
    for b in entries:
        call = call_of(b)
        if call is not None and call in dropped:
            tokens = count(b.render())
            left.append(LeftOut(source=b.label, kind=b.kind, tokens=tokens, reason=f"{reason}: an older step"))
            if b.label.startswith("result:"):
                unread |= _paths(b)
            continue
        kept.append(b)
    return Shown(tuple(kept), tuple(left), frozenset(unread), frozenset(x.source for x in left))


def _elide(
    entries: Sequence[Block], results: Mapping[str, ToolCallExecuted], drop: int, count, reason: str
) -> Shown:
    """With the oldest `drop` results shown whole replaced by pointers."""
    old = set(_results(entries)[: max(drop, 0)])
    out: list[Block] = []
    left: list[LeftOut] = []
    unread: set[str] = set()
    for b in entries:
        if b.label not in old:
            out.append(b)
            continue
        pointer = _pointer(b, results.get(b.label))
        out.append(pointer)
        saved = count(b.render()) - count(pointer.render())
        left.append(LeftOut(source=b.label, kind=b.kind, tokens=max(saved, 0), reason=f"{reason}: elided"))
        unread |= _paths(b)
    return Shown(tuple(out), tuple(left), frozenset(unread))


def _pointer(b: Block, e: ToolCallExecuted | None) -> Block:
    """One line in the result's place: what it was, how long, and how to see it again."""
    size = len(b.text)
    if e is not None and e.artifact_ref:
        again = f"read it again with read_artifact({e.artifact_ref})"
    else:
        again = "call the tool again to see it"
    tool = e.tool if e is not None else b.source.removeprefix("tool:")
    text = f"[result of {tool}, {size} characters, not shown here; {again}]"
    # The same label: a citation of this result stays valid, and the step line still points to it.
    return Block(b.label, b.kind, b.source, "trusted", text, "elided")


def _is_pointer(b: Block) -> bool:
    return b.version == "elided"


_PATH_LINE = re.compile(r"^path: (.+)$", re.M)


def _paths(b: Block) -> set[str]:
    """The file a read_file result showed, so that reading it again is offered once it is gone."""
    if b.source != "tool:read_file" or _is_pointer(b):
        return set()
    return set(_PATH_LINE.findall(b.text)[:1])

"""Context policies by name: what a task, a profile or the settings may name, and how it is parsed.

A leaf module, so that the settings and the profiles can check a name without the policies
themselves (runtime.agent.policy), which the settings may not import.

A name is one base policy and, after `+`, the additions that compose with any base: `notes` (a note
of each user message's standing rules and facts, shown after the stable prefix) and `pinned_tail`
(the notes at the end of the request instead). An addition alone has `auto` under it: `notes` is
`auto+notes`, and `pinned_tail`, which moves the notes, takes them too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.errors import ConfigError

DEFAULT = "auto"
NAMES = ("auto", "full", "window", "elide_tool_results", "user_verbatim", "compact")
ADDITIONS = ("notes", "pinned_tail")
KNOWN = "full, auto, compact, window:K, elide_tool_results:K, user_verbatim:K, each +notes or +pinned_tail"
_SPEC = re.compile(r"(?P<name>[a-z_]+)(?::(?P<k>\d+))?")


@dataclass(frozen=True)
class Policy:
    name: str
    k: int | None = None
    notes: bool = False
    pinned_tail: bool = False

    def __str__(self) -> str:
        base = self.name if self.k is None else f"{self.name}:{self.k}"
        # pinned_tail takes the notes with it, so the one addition names both.
        return base + ("+pinned_tail" if self.pinned_tail else "+notes" if self.notes else "")


def parse(spec: str) -> Policy:
    """`BASE[+notes|+pinned_tail]`: BASE is `full`, `auto`, `compact`, `window:K`, `elide_tool_results:K`
    or `user_verbatim:K` (K a whole number, at least 0 for elision and 1 for the others); an addition
    alone has `auto` under it. Anything else is a ConfigError (exit 2) naming what is known."""
    parts = [p.strip() for p in spec.strip().split("+")]
    if "" in parts:
        raise ConfigError(f"unknown context policy {spec!r}; known: {KNOWN}")
    additions = [p for p in parts if p in ADDITIONS]
    bases = [p for p in parts if p not in ADDITIONS]
    if len(set(additions)) != len(additions):
        raise ConfigError(f"context policy {spec!r} names an addition twice; known: {KNOWN}")
    if len(bases) > 1:
        raise ConfigError(f"context policy {spec!r} names {len(bases)} base policies; one at most, then +notes "
                          f"or +pinned_tail")
    base = _base(bases[0], spec) if bases else Policy(DEFAULT)
    pinned = "pinned_tail" in additions
    return Policy(base.name, base.k, notes=pinned or "notes" in additions, pinned_tail=pinned)


def _base(part: str, spec: str) -> Policy:
    m = _SPEC.fullmatch(part)
    if m is None or m.group("name") not in NAMES:
        raise ConfigError(f"unknown context policy {spec!r}; known: {KNOWN}")
    name, k = m.group("name"), m.group("k")
    if name in ("full", "auto", "compact"):
        if k is not None:
            raise ConfigError(f"context policy {name!r} takes no number: {spec!r}")
        return Policy(name)
    if k is None:
        raise ConfigError(f"context policy {name!r} needs a number: {name}:K")
    if name == "window" and int(k) < 1:
        raise ConfigError(f"a window keeps at least one step: {spec!r}")
    if name == "user_verbatim" and int(k) < 1:
        raise ConfigError(f"user_verbatim keeps the steps of at least the latest message: {spec!r}")
    return Policy(name, int(k))

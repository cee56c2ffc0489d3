"""Context policies by name: what a task, a profile or the settings may name, and how it is parsed.

A leaf module, so that the settings and the profiles can check a name without the policies
themselves (runtime.agent.policy), which the settings may not import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.errors import ConfigError

DEFAULT = "auto"
NAMES = ("auto", "full", "window", "elide_tool_results", "user_verbatim", "compact")
KNOWN = "full, auto, compact, window:K, elide_tool_results:K, user_verbatim:K"
_SPEC = re.compile(r"(?P<name>[a-z_]+)(?::(?P<k>\d+))?")


@dataclass(frozen=True)
class Policy:
    name: str
    k: int | None = None

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}:{self.k}"


def parse(spec: str) -> Policy:
    """`full`, `auto`, `compact`, `window:K`, `elide_tool_results:K` or `user_verbatim:K` (K a whole number, at least
    0 for elision and 1 for the others); anything else is a ConfigError (exit 2) naming what is known."""
    m = _SPEC.fullmatch(spec.strip())
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

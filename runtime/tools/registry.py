"""The tools a runtime knows, looked up by name and described to the model in one byte-stable order."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from runtime.canonical import canonical_json
from runtime.tools.contract import Tool, ToolContext, ToolFailure
from runtime.tools.executor import MASK_CHARS, ToolOutcome, execute


class ToolRegistry:
    """Tools by name. Every listing is sorted by name, whatever order the tools were registered in."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        name = tool.contract.name
        if name in self._tools:
            raise ToolFailure("duplicate_tool", f"a tool named {name!r} is already registered")
        self._tools[name] = tool

    def replace(self, tool: Tool) -> None:
        """Put `tool` where the tool of its name was (a definition that changed with a person's consent)."""
        name = tool.contract.name
        if name not in self._tools:
            raise ToolFailure("unknown_tool", f"there is no tool named {name!r} to replace")
        self._tools[name] = tool

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def get(self, name: str, allowed: Iterable[str] | None = None) -> Tool:
        """The tool called `name`; raises ToolFailure naming it and the nearest names if there is none.

        With `allowed`, only those names count: a registered tool outside them is `not_allowed`.
        """
        known = self.names() if allowed is None else sorted(set(allowed) & set(self._tools))
        if isinstance(name, str) and name in known:
            return self._tools[name]
        if isinstance(name, str) and name in self._tools:
            raise ToolFailure(
                "not_allowed",
                f"the tool {name!r} is not offered in this step. Available tools: {', '.join(known) or 'none'}",
                {"tool": name},
            )
        near = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(near)}?" if near else "."
        raise ToolFailure(
            "unknown_tool",
            f"there is no tool named {name!r}{hint} Available tools: {', '.join(known) or 'none'}",
            {"tool": str(name), "did_you_mean": near},
        )

    def call(
        self,
        name: str,
        ctx: ToolContext,
        raw_args: Any,
        *,
        allowed: Iterable[str] | None = None,
        approved: bool = False,
        mask_chars: int = MASK_CHARS,
    ) -> ToolOutcome:
        """Execute a proposed call by name; an unknown name, or one outside `allowed`, is a refused outcome.

        The model reads the refusal (with the nearest names) and can correct itself; nothing raises.
        """
        try:
            tool = self.get(name, allowed)
        except ToolFailure as failure:
            return ToolOutcome.refusal(str(name), failure)
        return execute(tool, ctx, raw_args, approved=approved, mask_chars=mask_chars)

    def select(self, names: Iterable[str] | None = None) -> list[Tool]:
        """The named tools (all when None), sorted by name; an unknown name raises."""
        chosen = self.names() if names is None else sorted(set(names))
        return [self.get(name) for name in chosen]

    def definitions(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        return [tool.contract.definition() for tool in self.select(names)]

    def definitions_json(self, names: Iterable[str] | None = None) -> str:
        """The definitions as the prompt prefix holds them: identical bytes in every process.

        A prefix that differs by one byte loses the model's prompt cache for everything after it.
        """
        return canonical_json(self.definitions(names), ascii_only=False)


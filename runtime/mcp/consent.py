"""Consent to a changed MCP tool: the definitions agentd accepted, read back from the log, and what a
server lists instead, shown as a diff for a person to judge.

A server's first listing of a tool is taken (the server is in the config on purpose). After that, a
tool whose name, description or schemas differ from the accepted definition is a rug pull until a
person has seen the change and said yes: its description goes into every request's trusted prefix.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from store.events import McpToolAccepted, PinnedTool, Recorded


def accepted(records: Iterable[Recorded]) -> dict[tuple[str, str], PinnedTool]:
    """(server, tool) -> the definition last accepted for it."""
    found: dict[tuple[str, str], PinnedTool] = {}
    for rec in records:
        if isinstance(rec.event, McpToolAccepted):
            found[(rec.event.tool.server, rec.event.tool.name)] = rec.event.tool
    return found


@dataclass(frozen=True)
class Changed:
    """A tool its server now lists otherwise than agentd accepted it: held back until a person consents."""

    accepted: PinnedTool
    listed: PinnedTool

    @property
    def server(self) -> str:
        return self.listed.server

    @property
    def name(self) -> str:
        return self.listed.name

    def diff(self) -> str:
        """The change as a unified diff of what a model would be shown: description, then both schemas."""
        return "".join(difflib.unified_diff(
            shown(self.accepted).splitlines(keepends=True), shown(self.listed).splitlines(keepends=True),
            fromfile=f"{self.server}/{self.name} accepted {self.accepted.sha256[:12]}",
            tofile=f"{self.server}/{self.name} listed now {self.listed.sha256[:12]}",
        ))


def shown(entry: PinnedTool) -> str:
    """A tool's definition as lines a person can compare: every part the tool's hash covers."""
    lines = ["description:", *(f"  {line}" for line in entry.description.splitlines() or [""])]
    lines += ["input schema:", *("  " + line for line in json.dumps(entry.input_schema, indent=2, sort_keys=True)
                                 .splitlines())]
    output = "none" if entry.output_schema is None else json.dumps(entry.output_schema, indent=2, sort_keys=True)
    lines += ["output schema:", *("  " + line for line in output.splitlines())]
    return "\n".join(lines) + "\n"

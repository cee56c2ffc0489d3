"""The gateway: the configured MCP servers' tools as agentd's tools, the allowlists that offer them,
the list a task pins, and what a server's changed list becomes (one notification per task).

Tools are registered from each server's list at start. A running task's requests show the tools it
pinned, so no later list edits its stable prefix; the tasks that pinned a server's tools hear of a
change through the notification queue, and a call of a changed tool is refused (McpTool.authorize).
A tool listed otherwise than the definition agentd accepted (in the log: McpToolAccepted) is offered
to no new task until a person consents to the change on the page (runtime/mcp/consent.py).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import mcp_types as types

from notifications.queue import enqueue, new_notification
from runtime import logs
from runtime.errors import ConfigError, InvalidCommand, NotFound
from runtime.mcp import consent, result
from runtime.mcp.client import UP, Connections
from runtime.mcp.document import Document
from runtime.mcp.secret import secrets_of
from runtime.mcp.tool import McpTool, arguments_model, pinned
from runtime.mcp_settings import EvidenceTerms, McpSettings
from runtime.skills.review import instruction_flags
from runtime.tools import ToolRegistry
from runtime.tools.schema import inline_schema
from store import EventStore
from store.events import MCP_TOOLS_STREAM, McpToolAccepted, McpToolsPinned, PinnedTool, TaskPhase

log = logs.get_logger("agentd.mcp")

_TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
# The parts of a pinned tool that come from agentd's config, not from its server.
_TERMS = ("effects", "needs_approval", "scope", "timeout_s")


class Gateway:
    """The MCP servers of one agentd process and the tools they lent it."""

    def __init__(
        self,
        settings: McpSettings,
        environ: Mapping[str, str] | None = None,
        *,
        log_dir: Path | None = None,
        store: EventStore | None = None,
        config_file: str = "the config",
        connect_timeout_s: float | None = None,
    ) -> None:
        environ = dict(os.environ if environ is None else environ)
        self.settings = settings
        self.store = store
        self._where = config_file
        self._secrets = secrets_of(environ)
        extra = {} if connect_timeout_s is None else {"connect_timeout_s": connect_timeout_s}
        self.connections = Connections(
            settings, environ, log_dir=log_dir, on_list_changed=self._list_changed, **extra
        )
        self.tools: dict[str, McpTool] = {}
        # Tools a server lists that agentd does not offer, and why: server -> tool -> reason.
        self.held: dict[str, dict[str, str]] = {name: {} for name in settings.servers}
        # Registered tools listed otherwise than accepted, by name: offered again once a person consents.
        self.changed: dict[str, consent.Changed] = {}
        self._registry: ToolRegistry | None = None
        # A server's new list arrives on the connections' thread, a consent on the page's.
        self._lock = threading.Lock()

    def open(self, registry: ToolRegistry) -> None:
        """Connect, and register every usable tool of every server that is up. A tool named like one
        agentd already has is refused here, before any task could be offered the wrong one."""
        self.connections.start()
        self._registry = registry
        for server in self.settings.servers:
            for listed in self.connections.tools.get(server, []):
                entry = pinned(server, listed, self.settings.servers[server].terms(listed.name))
                why = self._unusable(entry)
                if why is not None:
                    self.held[server][listed.name] = why
                    log.info("mcp.tool_held", server=server, tool=listed.name, reason=why)
                    continue
                if entry.name in registry:
                    owner = self.tools[entry.name].server if entry.name in self.tools else None
                    other = f"a tool of MCP server {owner}" if owner else "a tool agentd has"
                    raise ConfigError(
                        f"mcp.servers.{server} (from {self._where}): its tool {entry.name!r} has the name of "
                        f"{other}; leave the server out or rename the tool on it"
                    )
                tool = self._tool(entry)
                registry.register(tool)
                self.tools[entry.name] = tool
        if self.store is not None:
            first = self.judge(consent.accepted(self.store.read_stream(MCP_TOOLS_STREAM)))
            if first:
                self.store.append(MCP_TOOLS_STREAM, first, actor="agentd")

    def judge(self, known: Mapping[tuple[str, str], PinnedTool]) -> list[McpToolAccepted]:
        """Each listed tool against the definition accepted for it (`known`, from the log): one listed
        otherwise is held back for a person, the registry keeping the accepted one. Returns the first
        listings, to record as accepted (a command that only looks records nothing)."""
        first = []
        with self._lock:
            for name, tool in sorted(self.tools.items()):
                entry = tool.entry
                before = known.get((tool.server, name))
                if before is None:
                    first.append(McpToolAccepted(tool=entry, by="agentd: the server's first listing"))
                    continue
                if before.sha256 == entry.sha256:
                    continue
                # What the config says of the tool now, whatever it said when the definition was accepted.
                before = before.model_copy(update={k: getattr(entry, k) for k in _TERMS})
                self._hold_changed(consent.Changed(before, entry))
                self.tools[name] = self._tool(before)
                if self._registry is not None:
                    self._registry.replace(self.tools[name])
        return first

    def close(self) -> None:
        self.connections.close()

    def allowed(self, profile: str, listed: Iterable[str] = ()) -> list[str]:
        """The MCP tools a profile's tasks may be offered: the profile's own `mcp_tools` and the config's
        `[mcp.profiles.NAME]`, each `SERVER/TOOL` or `SERVER/*`, sorted by name."""
        config = self.settings.profiles.get(profile)
        entries = [*listed, *(config.tools if config else ())]
        with self._lock:
            waiting = set(self.changed)
        return sorted(
            name for name, tool in self.tools.items()
            if name not in waiting and (f"{tool.server}/{name}" in entries or f"{tool.server}/*" in entries)
        )

    def evidence(self, profile: str) -> list[tuple[Document, EvidenceTerms]]:
        """The resources and prompts a profile's tasks may be shown as evidence, each with its server's
        terms (tenants, authority): those of the servers the config's `[mcp.profiles.NAME] evidence` names."""
        config = self.settings.profiles.get(profile)
        servers = config.evidence if config else ()
        return [
            (doc, self.settings.servers[server].evidence)
            for server in servers
            for doc in self.connections.documents.get(server, [])
        ]

    def pending(self) -> list[consent.Changed]:
        """The tools waiting for a person's consent to their changed definition, by server and name."""
        with self._lock:
            return sorted(self.changed.values(), key=lambda c: (c.server, c.name))

    def consent(self, name: str, sha256: str, by: str) -> McpToolAccepted:
        """A person's yes to the changed definition of tool `name` they were shown (`sha256`): recorded,
        and offered to new tasks from now on. Refused if the server has listed yet another one since."""
        with self._lock:
            changed = self.changed.get(name)
            if changed is None:
                raise NotFound(f"no MCP tool called {name!r} waits for consent")
            if changed.listed.sha256 != sha256:
                raise InvalidCommand(
                    f"{changed.server} changed {name} again since the page showed it; nothing was recorded: "
                    "reload the page and judge the definition it lists now"
                )
            accepted = McpToolAccepted(tool=changed.listed, by=by)
            if self.store is not None:
                self.store.append(MCP_TOOLS_STREAM, [accepted], actor=by)
            tool = self._tool(changed.listed)
            if self._registry is not None:
                self._registry.replace(tool)
            self.tools[name] = tool
            del self.changed[name]
        log.info("mcp.tool_consented", server=changed.server, tool=name, sha256=sha256, by=by)
        return accepted

    def pin(self, names: Iterable[str]) -> McpToolsPinned | None:
        """The event fixing a task's MCP tools among `names` (the tools it is offered); None if it has none."""
        entries = [self.tools[n].entry for n in sorted(set(names)) if n in self.tools]
        return McpToolsPinned(tools=tuple(entries)) if entries else None

    def servers(self) -> list[dict[str, Any]]:
        """Each server with its state, the tools agentd offers of it and those it holds back."""
        waiting: dict[str, dict[str, str]] = {}
        for c in self.pending():
            waiting.setdefault(c.server, {})[c.name] = (
                f"listed otherwise than accepted ({c.accepted.sha256[:12]} -> {c.listed.sha256[:12]}): "
                "offered again once a person consents on the page"
            )
        rows = []
        for name, server in sorted(self.settings.servers.items()):
            tools = [_row(t.entry) for t in sorted(self.tools.values(), key=lambda t: t.name) if t.server == name]
            rows.append({
                "server": name,
                "transport": server.transport,
                "target": server.command if server.command is not None else server.url,
                "state": self.connections.state.get(name, "unknown"),
                "tools": tools,
                "held": [{"name": n, "reason": r}
                         for n, r in sorted({**self.held[name], **waiting.get(name, {})}.items())],
                "evidence": [{"kind": d.kind, "ref": d.ref, "title": d.title, "sha256": d.sha256, "chars": len(d.text)}
                             for d in self.connections.documents.get(name, [])],
            })
        return rows

    def status(self) -> list[dict[str, Any]]:
        """Each server in a line's worth: its state, the tools offered, held back, and waiting for consent."""
        waiting = {c.name for c in self.pending()}
        return [
            {"server": row["server"], "state": row["state"],
             "tools": sum(t["name"] not in waiting for t in row["tools"]),
             "held": sum(h["name"] not in waiting for h in row["held"]),
             "waiting_consent": sum(t["name"] in waiting for t in row["tools"])}
            for row in self.servers()
        ]

    # -- internals -------------------------------------------------------------------------------

    def _tool(self, entry: PinnedTool) -> McpTool:
        return McpTool(entry, self.connections.call, self._secrets, self._live(entry.server, entry.name))

    def _hold_changed(self, changed: consent.Changed) -> None:
        """Callers hold the lock."""
        self.changed[changed.name] = changed
        log.warning("mcp.tool_changed", server=changed.server, tool=changed.name, sha256=changed.listed.sha256)

    def _unusable(self, entry: PinnedTool) -> str | None:
        if not _TOOL_NAME.fullmatch(entry.name):
            return "its name is not lowercase letters, digits and '_' (what agentd's tool names are)"
        found = instruction_flags(entry.description)
        if found:
            # The description goes into the trusted prefix: one that reads like orders is not offered.
            return f"its description reads like instructions: {found[0]}"
        for label, schema in (("input", entry.input_schema), ("output", entry.output_schema)):
            problem = result.schema_problem(schema) if schema is not None else None
            if problem is not None:
                return f"its {label} schema {problem}"
        try:
            inline_schema(arguments_model(entry))
        except ValueError as e:
            # The grammar is built from the inlined schema; a recursive one cannot be.
            return f"its input schema cannot be offered: {e}"
        return None

    def _live(self, server: str, name: str):
        def live() -> str | None:
            if self.connections.state.get(server) != UP:
                return self.tools[name].entry.sha256  # a down server fails the call itself, with its reason
            for listed in self.connections.tools.get(server, []):
                if listed.name == name:
                    return pinned(server, listed, self.settings.servers[server].terms(name)).sha256
            return None

        return live

    def _list_changed(self, server: str, tools: list[types.Tool]) -> None:
        """A server's new list: tell each task that pinned its tools what changed, once per task."""
        terms = self.settings.servers[server].terms
        entries = {t.name: pinned(server, t, terms(t.name)) for t in tools}
        now = {name: entry.sha256 for name, entry in entries.items()}
        log.info("mcp.list_changed", server=server, tools=len(now))
        with self._lock:
            for name, tool in self.tools.items():
                if tool.server != server or name not in entries:
                    continue
                if entries[name].sha256 == tool.entry.sha256:
                    # Listed as accepted again: offered as before, and the consent asked for is moot.
                    self.changed.pop(name, None)
                else:
                    self._hold_changed(consent.Changed(tool.entry, entries[name]))
        if self.store is None:
            return
        for task_id, started in self._pinned_by_running_tasks(server).items():
            changed = sorted(n for n, h in started.items() if n in now and now[n] != h)
            removed = sorted(n for n in started if n not in now)
            added = sorted(n for n in now if n not in started and n not in self.tools)
            if not (changed or removed or added):
                continue
            parts = [f"{label} {', '.join(names)}" for label, names in
                     (("changed", changed), ("removed", removed), ("added", added)) if names]
            text = (
                f"MCP server {server} changed its tool list ({'; '.join(parts)}). This task keeps the tools "
                "it started with; a changed or removed tool is refused."
            )
            enqueue(self.store, new_notification(
                source="mcp_server", kind="tools_changed", tasks=[task_id], text=text,
                payload={"server": server, "changed": changed, "removed": removed, "added": added},
                dedupe_key=f"mcp:{server}",
            ))

    def _pinned_by_running_tasks(self, server: str) -> dict[str, dict[str, str]]:
        waiting = {TaskPhase.RUNNING.value, TaskPhase.AWAITING_APPROVAL.value, TaskPhase.WAITING_FOR_USER.value}
        found = {}
        for summary in self.store.tasks():
            if summary.phase not in waiting:
                continue
            for rec in self.store.read_stream(summary.task_id):
                if isinstance(rec.event, McpToolsPinned):
                    mine = {t.name: t.sha256 for t in rec.event.tools if t.server == server}
                    if mine:
                        found[summary.task_id] = mine
                    break
        return found


def _row(entry: PinnedTool) -> dict[str, Any]:
    return {
        "name": entry.name, "sha256": entry.sha256, "effects": list(entry.effects),
        "approval": entry.needs_approval, "scope": entry.scope, "timeout_s": entry.timeout_s,
        "description": entry.description,
    }

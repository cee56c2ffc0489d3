"""Connections to the MCP servers: one session per server, all kept open on one background event loop.

The SDK is async and agentd's tools run in worker threads, so the sessions live on a loop of their
own and a call from a tool's thread waits on it with a deadline. Nothing here can hang agentd: a
server that does not answer within its time is cancelled, one that died is marked down and every
later call of it fails at once with the reason, and closing gives each session a bounded time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from runtime import logs
from runtime.mcp.document import Document, read_all
from runtime.mcp_settings import McpSettings, Server
from runtime.tools.contract import ToolFailure

log = logs.get_logger("agentd.mcp")

CONNECT_TIMEOUT_S = 15.0
CLOSE_TIMEOUT_S = 5.0
# More than the server's own time: the SDK's read timeout fires first and says so.
MARGIN_S = 1.0

UP = "up"

# Called on the loop's worker thread with the server's name and its new list, after a list_changed.
ListChanged = Callable[[str, list[types.Tool]], None]


class Connections:
    """Every configured server's session, its state (`up` or why not), and its tool list as last listed."""

    def __init__(
        self,
        settings: McpSettings,
        environ: Mapping[str, str] | None = None,
        *,
        log_dir: Path | None = None,
        on_list_changed: ListChanged | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self._environ = dict(os.environ if environ is None else environ)
        self._log_dir = log_dir
        self.on_list_changed = on_list_changed
        self._connect_timeout_s = connect_timeout_s
        self.state: dict[str, str] = {name: "not started" for name in settings.servers}
        self.tools: dict[str, list[types.Tool]] = {}
        # The resources and prompts of the servers whose evidence the config asks for, read at start.
        self.documents: dict[str, list[Document]] = {}
        self._sessions: dict[str, ClientSession] = {}
        self._closing: dict[str, asyncio.Event] = {}
        self._served: dict[str, asyncio.Future] = {}
        self._relisting: set[asyncio.Future] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()

    # -- from any thread -------------------------------------------------------------------------

    def start(self) -> None:
        """Connect to every server at once; returns when each is up or has failed (at most the connect timeout)."""
        waits = [self._submit(self._open(name, server)) for name, server in self.settings.servers.items()]
        for wait in waits:
            try:
                wait.result(self._connect_timeout_s + CLOSE_TIMEOUT_S)
            except Exception:  # noqa: BLE001  each server's own failure is in its state already
                pass

    def call(self, server: str, tool: str, arguments: dict[str, Any], timeout_s: float) -> types.CallToolResult:
        """One tools/call; raises ToolFailure with one line for a server that is down, slow or broken."""
        session = self._sessions.get(server)
        if session is None or self.state.get(server) != UP:
            raise ToolFailure("server_unavailable", f"MCP server {server} is {self.state.get(server, 'unknown')}")
        future = self._submit(session.call_tool(tool, arguments, read_timeout_seconds=timeout_s))
        slow = f"MCP server {server} did not answer {tool} within {timeout_s:.3g}s; the call was cancelled"
        try:
            return future.result(timeout_s + MARGIN_S)
        except TimeoutError:
            future.cancel()
            raise ToolFailure("timeout", slow) from None
        except MCPError as e:
            if e.code == types.REQUEST_TIMEOUT:
                raise ToolFailure("timeout", slow) from None
            if e.code == types.CONNECTION_CLOSED:
                # The process exited or the peer hung up: every later call would fail the same way.
                self.state[server] = "down: the connection closed (the server exited or hung up)"
                log.warning("mcp.down", server=server, reason=self.state[server])
                raise ToolFailure("server_unavailable", f"MCP server {server} went down during {tool}") from None
            raise ToolFailure("server_unavailable", f"MCP server {server} refused {tool}: {_line(e)}") from None
        except Exception as e:  # noqa: BLE001  whatever else the SDK or transport raised, one line for this call
            raise ToolFailure("server_unavailable", f"MCP server {server} failed {tool}: {_line(e)}") from None

    def close(self) -> None:
        """End every session (each stdio server's process with it) and stop the loop."""
        for closing in list(self._closing.values()):
            self._loop.call_soon_threadsafe(closing.set)
        for served in list(self._served.values()):
            with contextlib.suppress(Exception):
                served.result(CLOSE_TIMEOUT_S * 2)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CLOSE_TIMEOUT_S)

    def _submit(self, coroutine) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    # -- on the loop -----------------------------------------------------------------------------

    async def _open(self, name: str, server: Server) -> None:
        ready = self._loop.create_future()
        self._closing[name] = asyncio.Event()
        self._served[name] = asyncio.run_coroutine_threadsafe(self._serve(name, server, ready), self._loop)
        await ready

    async def _serve(self, name: str, server: Server, ready: asyncio.Future) -> None:
        """Hold one server's session open until closing; the transport's contexts are entered and left here."""
        self.state[name] = "starting"
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(stack, name, server)
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._handler(name))
                )
                with anyio.fail_after(self._connect_timeout_s):
                    await session.initialize()
                    self.tools[name] = await _list(session)
                    if server.evidence is not None:
                        self.documents[name] = await read_all(name, session)
                self._sessions[name] = session
                self.state[name] = UP
                log.info("mcp.up", server=name, tools=len(self.tools[name]))
                _settle(ready)
                await self._closing[name].wait()
                self.state[name] = "closed"
        except Exception as e:  # noqa: BLE001  a server that cannot start is down; agentd goes on without it
            self.state[name] = f"down: {_line(e)}"
            # Info, not a warning: the state is what `agentd mcp list` shows, and a command without a
            # data folder would print a warning on stderr beside its own one line.
            log.info("mcp.down", server=name, reason=self.state[name])
        finally:
            self._sessions.pop(name, None)
            _settle(ready)

    async def _transport(self, stack: contextlib.AsyncExitStack, name: str, server: Server):
        if server.command is not None:
            # The server gets the SDK's minimal environment (PATH, HOME, ...) and its own `env`; agentd's
            # own variables, its secrets among them, stay here.
            params = StdioServerParameters(command=server.command, args=list(server.args), env=dict(server.env))
            streams = await stack.enter_async_context(stdio_client(params, errlog=self._errlog(stack, name)))
            return streams[0], streams[1]
        headers = {}
        for header, variable in server.headers.items():
            if variable not in self._environ:
                raise ToolFailure("server_unavailable", f"header {header} names {variable}, which is not set")
            headers[header] = self._environ[variable]
        client = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
        streams = await stack.enter_async_context(streamable_http_client(server.url, http_client=client))
        return streams[0], streams[1]

    def _errlog(self, stack: contextlib.ExitStack, name: str):
        # What a stdio server says on stderr goes to its own log file, never into agentd's output.
        if self._log_dir is None:
            return stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
        self._log_dir.mkdir(parents=True, exist_ok=True)
        return stack.enter_context((self._log_dir / f"mcp-{name}.log").open("a", encoding="utf-8"))

    def _handler(self, name: str):
        async def handle(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                # Held until done: the loop keeps only a weak reference to a task.
                relisting = asyncio.ensure_future(self._relist(name))
                self._relisting.add(relisting)
                relisting.add_done_callback(self._relisting.discard)
            elif isinstance(message, Exception):
                # The transport broke (the process died, the stream carried garbage): no call will get through.
                self.state[name] = f"down: {_line(message)}"
                log.warning("mcp.broken", server=name, reason=self.state[name])

        return handle

    async def _relist(self, name: str) -> None:
        session = self._sessions.get(name)
        if session is None:
            return
        try:
            with anyio.fail_after(self._connect_timeout_s):
                tools = await _list(session)
        except Exception as e:  # noqa: BLE001  a list that cannot be read counts as every tool gone
            log.warning("mcp.relist_failed", server=name, error=_line(e))
            tools = []
        self.tools[name] = tools
        if self.on_list_changed is not None:
            await anyio.to_thread.run_sync(self.on_list_changed, name, tools)


async def _list(session: ClientSession) -> list[types.Tool]:
    tools, cursor = [], None
    while True:
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def _settle(ready: asyncio.Future) -> None:
    if not ready.done():
        ready.set_result(None)


def _line(e: BaseException) -> str:
    """An exception as one short line; a group's first leaf says what actually failed."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = " ".join((e.message if isinstance(e, ToolFailure) else str(e)).split()) or type(e).__name__
    return text[:300]

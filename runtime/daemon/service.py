"""The long-running host: holds the data directory, the store, the model and the web page."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import threading
from typing import Callable, Iterator

import anyio
import uvicorn

from notifications.watcher import WorkspaceWatcher
from runtime import logs
from runtime.agent.loop import Runtime
from runtime.agent.progress import Board, Progress, Tally, line
from runtime.config import Settings
from runtime.daemon.dispatch import Scheduler
from runtime.daemon.membership import Membership, new_worker_id
from runtime.daemon.stop import StopRequest
from runtime.harness.schedules import ScheduleRunner
from runtime.skills.watcher import CatalogWatcher
from runtime.trace.export import TRACES_FILE, Sink, exporter
from runtime.trace.follower import Follower
from runtime.web import access
from runtime.web.api import Api
from runtime.web.app import create_app

log = logs.get_logger("agentd.daemon")

# Seconds a stop waits for the page's open requests before it cancels them.
GRACE_S = 5


def page_address(settings: Settings) -> str:
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"http://{host}:{settings.port}/"


def login_address(settings: Settings) -> str:
    """The address to open in a browser: it carries the page token, which the page trades for a cookie."""
    return f"{page_address(settings)}?token={access.page_token(settings.data_dir)}"


class Narrator:
    """The daemon's progress reporter: the page's board of what each task is doing now, and one log
    line per decision (its outcome, prompt and evaluated tokens, seconds)."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self._tally = Tally()

    def __call__(self, p: Progress) -> None:
        self.board(p)
        d = self._tally(p)
        if d is not None:
            log.info(
                "decided", task_id=d.task_id, step=d.step, outcome=d.outcome, prompt_tokens=d.prompt_tokens,
                evaluated_tokens=d.evaluated_tokens, seconds=round(d.seconds, 2),
            )


async def run(
    settings: Settings, rt: Runtime, sock: socket.socket | None = None, stop: StopRequest | None = None,
    serving: Callable[[], None] | None = None,
) -> None:
    """Run tasks and serve the page until SIGINT or SIGTERM; uvicorn turns either into a shutdown.

    `sock` is the page's socket, bound already (runtime/daemon/listener.py); without it uvicorn binds.
    `stop` is the SIGTERM handler `agentd serve` installed first: a stop it took before the server
    existed stops the server as it starts. `serving` is called once the page takes connections.
    """
    store = rt.store
    board = Board()
    rt.progress = Narrator(board)
    member = Membership(
        worker_id=new_worker_id(), lease_s=settings.lease_s,
        workspaces=tuple(root.resolve() for root in settings.worker_workspaces),
    )
    await anyio.to_thread.run_sync(lambda: store.workers.register(
        member.worker_id, socket.gethostname(), os.getpid(), page_address(settings),
        [str(root) for root in member.workspaces],
    ))
    scheduler = Scheduler(rt, board=board, data_dir=settings.data_dir, member=member)
    watcher = WorkspaceWatcher(store, data_dir=settings.data_dir)

    def status() -> dict:
        return {
            "running_tasks": sorted(scheduler.running),
            "deciding": {task_id: line(p) for task_id, p in sorted(board.snapshot()[1].items())},
            "model_state": rt.model.stats(),
            "watcher": dataclasses.asdict(watcher.stats()),
            "pid": os.getpid(),
            "worker_id": member.worker_id,
            "mcp": rt.mcp.status() if rt.mcp is not None else [],
        }

    token = access.page_token(settings.data_dir)
    api = Api(
        store, token, profiles=lambda: rt.profiles, workspace=settings.workspace.resolve(),
        default_policy=settings.context_policy, stopping=lambda: server.should_exit, decided=scheduler.wake,
        artifacts=rt.artifacts,
    )
    config = uvicorn.Config(
        create_app(
            store, rt.model.name, status, token=token, tools=rt.tools,
            # `server` is bound below, before the page can take its first request.
            stopping=lambda: server.should_exit,
            decided=scheduler.wake,
            board=board,
            host=settings.host,
            artifacts=rt.artifacts,
            mcp=rt.mcp,
            api=api,
        ),
        host=settings.host,
        port=settings.port,
        # Our own logging already routes uvicorn's loggers; its default config would bypass redaction.
        log_config=None,
        lifespan="off",
        access_log=False,
        # A stop waits this long for open requests, then cancels them: whatever a browser holds open, the
        # stop ends, and the page's streams end within a poll of their own anyway.
        timeout_graceful_shutdown=GRACE_S,
    )

    def started() -> None:
        log.info("serving", page=page_address(settings), last_seq=store.last_seq())
        if serving is not None:
            serving()

    server = _Server(config, started)
    if stop is not None:
        stop.hand_to(server.handle_exit)
    recovered = await anyio.to_thread.run_sync(rt.jobs.recover)
    if recovered:
        log.warning("background jobs orphaned by the last stop recorded as unknown", jobs=recovered)
    # Spans from the log as it grows; the sink's queue is bounded and drained on its own thread.
    traces = Sink(exporter(settings.otlp_endpoint, settings.data_dir / TRACES_FILE))
    async with anyio.create_task_group() as tg:
        tg.start_soon(Follower(store, traces).run)
        await tg.start(watcher.run)
        await tg.start(CatalogWatcher(store, rt.skill_roots).run)
        tg.start_soon(ScheduleRunner(store).run)
        tg.start_soon(scheduler.run)
        await server.serve(sockets=None if sock is None else [sock])
        # The page has stopped; decisions in flight are abandoned at their next await and taken
        # again from the log at the next start.
        tg.cancel_scope.cancel()
    # Its tasks go back now, not when their leases would run out: another worker takes them at once.
    await anyio.to_thread.run_sync(store.workers.stop, member.worker_id)
    await anyio.to_thread.run_sync(rt.jobs.close)
    await anyio.to_thread.run_sync(traces.close)
    if rt.mcp is not None:
        await anyio.to_thread.run_sync(rt.mcp.close)
    log.info("stopped")


class _Server(uvicorn.Server):
    """uvicorn's server, minus re-raising the caught signal after shutdown, plus a call once it serves.

    uvicorn re-raises SIGTERM once it has stopped so the default action kills the process; agentd has
    its own cleanup to run after the server (release the instance lock, close the store), then exits 0.
    """

    def __init__(self, config: uvicorn.Config, started: Callable[[], None]) -> None:
        super().__init__(config)
        self._started = started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        # The socket listens and is served from here on; a stop asked for meanwhile serves nothing.
        if self.started and not self.should_exit:
            self._started()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

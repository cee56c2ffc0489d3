"""The page's change stream: a server-sent `changed` event whenever the log moves, and `progress`
whenever what a task is doing now changes (which moves no log), for live updates."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable

import anyio
from anyio import to_thread
from starlette.datastructures import State

from runtime.agent.progress import Board
from runtime.web.views import progress_json
from store import EventStore

POLL_S = 0.25
PING_S = 15.0


async def changes(
    store: EventStore, state: State, stopping: Callable[[], bool], board: Board | None = None
) -> AsyncIterator[str]:
    """`changed` with the last seq each time it moves, `progress` with the board (task id to its stage)
    each time that changes, a comment ping when quiet, counted in `state.open_streams`.

    Starlette cancels this when the client goes away; a server shutdown (`stopping`) ends it at the next
    poll, or uvicorn would wait for it forever.
    """
    state.open_streams += 1
    try:
        seen = await to_thread.run_sync(store.last_seq)
        # Sent on every (re)connect: a page that missed changes while the stream was down catches up.
        yield f"retry: 2000\nevent: changed\ndata: {seen}\n\n"
        board_seen = -1
        if board is not None:
            board_seen, latest = board.snapshot()
            yield _progress(latest)
        quiet_since = time.monotonic()
        while not stopping():
            await anyio.sleep(POLL_S)
            sent = False
            now = await to_thread.run_sync(store.last_seq)
            if now != seen:
                seen, sent = now, True
                yield f"event: changed\ndata: {now}\n\n"
            if board is not None and board.version != board_seen:
                (board_seen, latest), sent = board.snapshot(), True
                yield _progress(latest)
            if sent:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= PING_S:
                quiet_since = time.monotonic()
                yield ": ping\n\n"
    finally:
        state.open_streams -= 1


def _progress(latest) -> str:
    # One line of JSON: json.dumps escapes any newline inside a value, so it cannot end the event.
    return f"event: progress\ndata: {json.dumps(progress_json(latest))}\n\n"

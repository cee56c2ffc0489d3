"""The page's change stream: a server-sent `changed` event whenever the log moves, for live updates."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import anyio
from anyio import to_thread
from starlette.datastructures import State

from store import EventStore

POLL_S = 0.25
PING_S = 15.0


async def changes(store: EventStore, state: State, stopping: Callable[[], bool]) -> AsyncIterator[str]:
    """`changed` with the last seq each time it moves, a comment ping when quiet, counted in `state.open_streams`.

    Starlette cancels this when the client goes away; a server shutdown (`stopping`) ends it at the next
    poll, or uvicorn would wait for it forever.
    """
    state.open_streams += 1
    try:
        seen = await to_thread.run_sync(store.last_seq)
        # Sent on every (re)connect: a page that missed changes while the stream was down catches up.
        yield f"retry: 2000\nevent: changed\ndata: {seen}\n\n"
        quiet_since = time.monotonic()
        while not stopping():
            await anyio.sleep(POLL_S)
            now = await to_thread.run_sync(store.last_seq)
            if now != seen:
                seen = now
                quiet_since = time.monotonic()
                yield f"event: changed\ndata: {now}\n\n"
            elif time.monotonic() - quiet_since >= PING_S:
                quiet_since = time.monotonic()
                yield ": ping\n\n"
    finally:
        state.open_streams -= 1

"""The stop a SIGTERM asks of `agentd serve`, kept from its first line until the page's server can take it.

Python's default for SIGTERM ends the process where it stands (exit -15): during the second or more
that the daemon's modules import and the model loads, and in the moment between the address line
and uvicorn's own handler, `agentd stop` or a service manager killed the daemon instead of stopping it.
Noted instead, the request is looked at between the start's steps (the model loads in C code, which
no handler interrupts anyway) and handed to the server as soon as there is one.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Callable

Handler = Callable[[int, FrameType | None], None]


class StopRequest:
    """SIGTERM's handler from the start of `agentd serve` on; `requested` once one came."""

    def __init__(self) -> None:
        self.requested = False
        self._then: Handler | None = None

    def install(self) -> None:
        """Take SIGTERM from here on. Call it from the main thread, before any thread starts."""
        signal.signal(signal.SIGTERM, self._note)
        # `agentd start` spawns the daemon with SIGTERM blocked, so that one sent before this line
        # waits for it; unblocked here, it arrives now. Threads and processes started later inherit
        # the mask from this thread, so none of them keeps SIGTERM blocked.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})

    def hand_to(self, handler: Handler) -> None:
        """Pass every SIGTERM on to `handler` as well (uvicorn's server), one already noted at once."""
        self._then = handler
        if self.requested:
            handler(signal.SIGTERM, None)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self._then is not None:
            self._then(signum, frame)

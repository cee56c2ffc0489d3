"""The daemon's web page: an ASGI app showing what agentd holds (approvals join it later)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from anyio import to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from store import EventStore

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
# Everything shown may come from a model or a user; nothing on the page needs script or outside content.
CSP = "default-src 'none'; style-src 'self' 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"


def create_app(store: EventStore, model_name: str, status: Callable[[], dict] | None = None) -> Starlette:
    async def index(request: Request):
        # Store reads are blocking SQL; keep them off the event loop that serves everyone else.
        tasks = await to_thread.run_sync(store.tasks)
        last_seq = await to_thread.run_sync(store.last_seq)
        response = TEMPLATES.TemplateResponse(
            request, "tasks.html", {"tasks": tasks[::-1], "model": model_name, "last_seq": last_seq}
        )
        response.headers["Content-Security-Policy"] = CSP
        return response

    async def healthz(request: Request):
        body = {"status": "ok", "last_seq": await to_thread.run_sync(store.last_seq), "model": model_name}
        if status is not None:
            body.update(status())
        return JSONResponse(body)

    return Starlette(routes=[Route("/", index), Route("/healthz", healthz)])

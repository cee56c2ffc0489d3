"""The daemon's web page: approvals, tasks, what they changed and the log, behind the page token and kept live."""

from __future__ import annotations

import urllib.parse
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from anyio import to_thread
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runtime.agent.progress import Board
from runtime.artifacts import ArtifactStore
from runtime.errors import AgentdError, InvalidCommand, NotFound
from runtime.harness import approvals as deciding, tasks as task_commands, undo
from runtime.tools import ToolRegistry
from runtime.tools.changes import Kind
from runtime.web import access, hosts, live, views as page_views
from runtime.web.api import Api
from store import EventStore
from store.events import event_types

if TYPE_CHECKING:  # the MCP SDK is imported only where a server is configured
    from runtime.mcp.gateway import Gateway

HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))
TEMPLATES.env.filters.update(utc=page_views.utc, ago=page_views.ago)

# Arguments, reasons and tool output come from a model: the page runs its own script and stylesheet
# and nothing else, so text that slipped past escaping still could not run or load anything.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
FORM = "application/x-www-form-urlencoded"
MAX_FORM_BYTES = 16 * 1024
LOCKED = (
    "This page needs the address agentd printed when it started, the one ending in ?token=. "
    "Open that address once in this browser."
)

Handler = Callable[[Request], Awaitable[Response]]


def create_app(
    store: EventStore,
    model_name: str,
    status: Callable[[], dict] | None = None,
    *,
    token: str,
    tools: ToolRegistry | None = None,
    stopping: Callable[[], bool] = lambda: False,
    decided: Callable[[], None] = lambda: None,
    board: Board | None = None,
    host: str = "127.0.0.1",
    artifacts: ArtifactStore | None = None,
    mcp: Gateway | None = None,
    api: Api | None = None,
) -> Starlette:
    """The page's ASGI app. `stopping` is polled by open change streams so a server shutdown ends them;
    `decided` is called after each decision recorded here (the daemon wakes its scheduler with it);
    `board` is what each task is doing now, shown on its page and sent down the change stream; `host`
    is the address it is served on, the one name besides loopback's that requests may carry; `artifacts`
    holds the contents of the files tasks changed, for their diffs and Undo (without it, neither is offered);
    `mcp` the MCP servers, whose changed tools wait on the approvals page for a person's consent; `api`
    the HTTP API under /api/v1/ (runtime/web/api.py)."""
    page = _Page(store, model_name, token, tools, stopping, decided, board, artifacts, mcp)

    async def healthz(request: Request) -> Response:
        # Anyone who can reach the port may ask whether agentd is up; which tasks run, its pid and its
        # model (a path or URL) are for a session or a local command holding the page token.
        body: dict = {"status": "ok", "last_seq": await to_thread.run_sync(store.last_seq)}
        if page.trusted(request):
            body["model"] = model_name
            if status is not None:
                body.update(status())
        return JSONResponse(body)

    guarded = page.guarded
    app = Starlette(
        routes=[
            *(api.routes() if api is not None else []),
            Route("/", guarded(page.approvals)),
            Route("/approvals", guarded(page.approvals)),
            Route("/approvals/{approval_id}", guarded(page.decide), methods=["POST"]),
            Route("/mcp/tools/{name}/consent", guarded(page.consent), methods=["POST"]),
            Route("/tasks", guarded(page.tasks)),
            Route("/tasks/{task_id}", guarded(page.task)),
            Route("/tasks/{task_id}/say", guarded(page.say), methods=["POST"]),
            Route("/tasks/{task_id}/close", guarded(page.close), methods=["POST"]),
            # GET asks to confirm and changes nothing; only the confirmation's POST, with its CSRF token, acts.
            Route("/tasks/{task_id}/undo", guarded(partial(page.restore, "undo")), methods=["GET", "POST"]),
            Route("/tasks/{task_id}/redo", guarded(partial(page.restore, "redo")), methods=["GET", "POST"]),
            Route("/tasks/{task_id}/calls/{call_index:int}", guarded(page.manifest)),
            Route("/events", guarded(page.events)),
            Route("/stream", guarded(page.stream)),
            Route("/healthz", healthz),
            # Browsers ask for it on every page; an empty answer keeps their consoles free of 404s.
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[Middleware(_SecurityHeaders), Middleware(hosts.HostGuard, host=host)],
    )
    app.state.open_streams = 0
    return app


class _Page:
    """The page's handlers, sharing the store, the page token, the tool registry and the shutdown flag."""

    def __init__(
        self,
        store: EventStore,
        model_name: str,
        token: str,
        tools: ToolRegistry | None,
        stopping: Callable[[], bool],
        decided: Callable[[], None],
        board: Board | None,
        artifacts: ArtifactStore | None,
        mcp: Gateway | None,
    ) -> None:
        self.store = store
        self.mcp = mcp
        self.model_name = model_name
        self.token = token
        self.tools = tools
        self.stopping = stopping
        self.decided = decided
        self.board = board
        self.artifacts = artifacts

    # -- access ----------------------------------------------------------------------------------

    def guarded(self, handler: Handler) -> Handler:
        """Nothing past this without the session cookie; `?token=` on a GET trades the token for one."""

        async def endpoint(request: Request) -> Response:
            if request.method in ("GET", "HEAD") and "token" in request.query_params:
                return self._login(request)
            if not self._valid_session(request.cookies.get(access.SESSION_COOKIE)):
                return self._plain(request, 401, "Open the address agentd printed", LOCKED)
            return await handler(request)

        return endpoint

    def _login(self, request: Request) -> Response:
        if not access.valid_token(self.token, request.query_params.get("token")):
            return self._plain(request, 401, "Wrong token", "That token is not this agentd's. " + LOCKED)
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        # One leading slash, so "//host/?token=" cannot turn the redirect into a link to another site.
        target = "/" + request.url.path.lstrip("/") + ("?" + urllib.parse.urlencode(rest) if rest else "")
        response = RedirectResponse(target, status_code=303)
        session = request.cookies.get(access.SESSION_COOKIE)
        # A browser that already holds a session keeps it: its other tabs' forms stay valid.
        if not self._valid_session(session):
            session = access.new_session(self.token)
        response.set_cookie(access.SESSION_COOKIE, session, httponly=True, samesite="strict", path="/")
        return response

    def trusted(self, request: Request) -> bool:
        """A browser with a session, or a command on this machine sending the page token as a bearer."""
        if self._valid_session(request.cookies.get(access.SESSION_COOKIE)):
            return True
        scheme, _, offered = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and offered.isascii() and access.valid_token(self.token, offered.strip())

    def _valid_session(self, cookie: str | None) -> bool:
        # hmac.compare_digest refuses non-ASCII str; such a cookie is simply not ours.
        return bool(cookie) and cookie.isascii() and access.valid_session(self.token, cookie)

    def _plain(self, request: Request, status: int, title: str, message: str) -> Response:
        """A page with no data on it: no navigation, no pending count, no script."""
        context = {"title": title, "message": message, "nav": None}
        return TEMPLATES.TemplateResponse(request, "problem.html", context, status_code=status)

    # -- rendering -------------------------------------------------------------------------------

    def _render(
        self, request: Request, name: str, context: dict, here: str, status: int = 200, live: bool = True
    ) -> Response:
        nav = {"here": here, "pending": context["pending"], "model": self.model_name, "live": live}
        context = {**context, "nav": nav}
        return TEMPLATES.TemplateResponse(request, name, context, status_code=status)

    async def _problem(
        self, request: Request, status: int, title: str, message: str, back: str = "/approvals"
    ) -> Response:
        context = await to_thread.run_sync(self._frame)
        context.update(title=title, message=message, back=back)
        # Not live: a refresh would fetch the address the form posted to, which has no page.
        return self._render(request, "problem.html", context, here="", status=status, live=False)

    def _frame(self) -> dict:
        with self.store.reading() as conn:
            return page_views.frame(conn)

    def _csrf(self, request: Request) -> str:
        return access.csrf_token(self.token, request.cookies[access.SESSION_COOKIE])

    async def _posted(self, request: Request, what: str, back: str) -> dict[str, str] | Response:
        """The form posted, if it came from this session's page; else the problem page saying why not."""
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != FORM:
            return await self._problem(
                request, 415, "Not a form", f"The {what} must come from the page's form.", back=back
            )
        form = await _form(request)
        if form is None:
            return await self._problem(
                request, 400, "Bad form", "The form could not be read (is it over 16 KiB?).", back=back
            )
        offered = form.get(access.CSRF_FIELD, "")
        if not (offered.isascii() and access.valid_csrf(self.token, request.cookies[access.SESSION_COOKIE], offered)):
            return await self._problem(
                request, 403, "Form not from this page",
                f"The form did not carry this session's check value; nothing was recorded. "
                f"Reload the page and send the {what} again.", back=back,
            )
        return form

    def _by(self, request: Request) -> str:
        # No user accounts: the session's nonce tells two browsers apart in the log.
        return f"web:{request.cookies[access.SESSION_COOKIE].split('.', 1)[0][:8]}"

    # -- pages -----------------------------------------------------------------------------------

    async def approvals(self, request: Request) -> Response:
        done = request.query_params.get("done")
        context = await to_thread.run_sync(page_views.approvals_page, self.store, self.tools, done)
        context["changed_tools"] = page_views.changed_tools(self.mcp.pending()) if self.mcp is not None else []
        consented = request.query_params.get("consented")
        if consented:
            context["flash"] = f"{consented}'s new definition is offered to new tasks from now on."
        context["csrf"] = self._csrf(request)
        return self._render(request, "approvals.html", context, here="approvals")

    async def decide(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        form = await self._posted(request, "decision", back="/approvals")
        if isinstance(form, Response):
            return form
        decision, shown = form.get("decision"), form.get("arguments_hash")
        if decision not in ("approve", "deny") or not shown:
            message = "The form must say approve or deny, for the arguments shown."
            return await self._problem(request, 400, "Bad form", message)
        decide = partial(
            deciding.decide, self.store, approval_id, grant=decision == "approve",
            by=self._by(request), reason=form.get("reason", "").strip(), arguments_hash=shown,
        )
        try:
            await to_thread.run_sync(decide)
        except NotFound as e:
            return await self._problem(request, 404, "No such approval", str(e))
        except InvalidCommand as e:
            return await self._problem(request, 409, "Not decided", str(e))
        self.decided()
        return RedirectResponse(f"/approvals?done={urllib.parse.quote(approval_id)}", status_code=303)

    async def consent(self, request: Request) -> Response:
        """A person's yes to an MCP tool's changed definition, bound to the definition the page showed."""
        name = request.path_params["name"]
        form = await self._posted(request, "consent", back="/approvals")
        if isinstance(form, Response):
            return form
        shown = form.get("sha256", "")
        if self.mcp is None:
            return await self._problem(request, 404, "No MCP servers", "This agentd has no MCP servers configured.")
        if not shown:
            return await self._problem(request, 400, "Bad form", "The form must carry the definition it showed.")
        try:
            await to_thread.run_sync(partial(self.mcp.consent, name, shown, by=self._by(request)))
        except NotFound as e:
            return await self._problem(request, 404, "Nothing to consent to", str(e))
        except InvalidCommand as e:
            return await self._problem(request, 409, "Not recorded", str(e))
        return RedirectResponse(f"/approvals?consented={urllib.parse.quote(name)}", status_code=303)

    async def tasks(self, request: Request) -> Response:
        context = await to_thread.run_sync(page_views.tasks_page, self.store)
        return self._render(request, "tasks.html", context, here="tasks")

    async def task(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        done = request.query_params.get("done")
        context = await to_thread.run_sync(
            page_views.task_page, self.store, task_id, self.board, self.artifacts, done
        )
        if context is None:
            return await self._problem(request, 404, "No such task", f"There is no task {task_id!r}.", back="/tasks")
        context["csrf"] = self._csrf(request)
        return self._render(request, "task.html", context, here="tasks")

    async def say(self, request: Request) -> Response:
        return await self._task_command(
            request, "message", "Not sent", lambda form, records: task_commands.say(records, form.get("text", "")),
            # A conversation that waited for the user runs again: the scheduler takes it now, not at its poll.
            wake=True,
        )

    async def close(self, request: Request) -> Response:
        return await self._task_command(
            request, "close", "Not closed", lambda form, records: task_commands.close_task(records)
        )

    async def _task_command(
        self, request: Request, what: str, refused: str, decide: Callable[[dict, list], list], wake: bool = False
    ) -> Response:
        """A command from the task page's form, decided on the task's stream as it is when it is written."""
        task_id = request.path_params["task_id"]
        back = f"/tasks/{urllib.parse.quote(task_id)}"
        form = await self._posted(request, what, back=back)
        if isinstance(form, Response):
            return form
        append = partial(
            task_commands.append_decided, self.store, task_id, partial(decide, form), self._by(request),
            None if self.artifacts is None else self.artifacts.secrets,
        )
        try:
            await to_thread.run_sync(append)
        except NotFound as e:
            return await self._problem(request, 404, "No such task", str(e), back="/tasks")
        except InvalidCommand as e:
            return await self._problem(request, 409, refused, str(e), back=back)
        if wake:
            self.decided()
        return RedirectResponse(back, status_code=303)

    async def restore(self, kind: Kind, request: Request) -> Response:
        """Undo (or redo) a task's changes, all of them or one file's (`path`): a GET shows what it would do
        and asks to confirm; the confirmation's POST, from this session's page, does it, as `task undo` does."""
        task_id = request.path_params["task_id"]
        back = f"/tasks/{urllib.parse.quote(task_id)}"
        refused = "Not undone" if kind == "undo" else "Not redone"
        if self.artifacts is None:
            message = f"This page has no artifact store to {kind} from; agentd task {kind} {task_id} does it."
            return await self._problem(request, 409, refused, message, back=back)
        if request.method != "POST":
            only = request.query_params.get("path") or None
            show = partial(page_views.restore_page, self.store, self.artifacts, task_id, kind, only)
            try:
                context = await to_thread.run_sync(show)
            except NotFound as e:
                return await self._problem(request, 404, "No such task", str(e), back="/tasks")
            except AgentdError as e:
                return await self._problem(request, 409, refused, str(e), back=back)
            context["csrf"] = self._csrf(request)
            # Not live: the confirmation must stay as it was read, not swap under the pointer.
            return self._render(request, "restore.html", context, here="tasks", live=False)
        form = await self._posted(request, kind, back=back)
        if isinstance(form, Response):
            return form
        if form.get("confirm") != kind or not form.get("version", "").isdigit():
            message = f"The {kind} must be confirmed on its own page, for the changes shown there; nothing was done."
            return await self._problem(request, 400, "Bad form", message, back=back)
        act = partial(
            _restore_as_shown, self.store, self.artifacts, task_id, kind, only=form.get("path") or None,
            by=self._by(request), version=int(form["version"]),
        )
        try:
            done = await to_thread.run_sync(act)
        except NotFound as e:
            return await self._problem(request, 404, "No such task", str(e), back="/tasks")
        except AgentdError as e:
            return await self._problem(request, 409, refused, str(e), back=back)
        return RedirectResponse(back + (f"?done={urllib.parse.quote(done)}" if done else ""), status_code=303)

    async def manifest(self, request: Request) -> Response:
        task_id, index = request.path_params["task_id"], request.path_params["call_index"]
        try:
            attempt = _positive(request.query_params.get("attempt"))
        except ValueError:
            return await self._problem(request, 400, "Bad attempt", "attempt must be a positive number.", back="/tasks")
        context = await to_thread.run_sync(page_views.manifest_page, self.store, task_id, index, attempt)
        if context is None:
            message = f"Task {task_id!r} recorded no context manifest for call {index}" + (
                f", attempt {attempt}." if attempt else "."
            )
            return await self._problem(request, 404, "No such manifest", message, back=f"/tasks/{task_id}")
        return self._render(request, "manifest.html", context, here="tasks")

    async def events(self, request: Request) -> Response:
        q = request.query_params
        try:
            before, limit = _positive(q.get("before")), _positive(q.get("limit"))
        except ValueError:
            message = "before and limit must be positive numbers."
            return await self._problem(request, 400, "Bad page", message, back="/events")
        limit = min(limit or 50, page_views.EVENTS_LIMIT_MAX)
        task, type_ = q.get("task", "").strip(), q.get("type", "").strip()
        context = await to_thread.run_sync(
            partial(page_views.events_page, self.store, task=task, type_=type_, before=before, limit=limit)
        )
        context.update(task=task, type=type_, limit=limit, before=before, types=event_types())
        return self._render(request, "events.html", context, here="events")

    # -- live updates ----------------------------------------------------------------------------

    async def stream(self, request: Request) -> Response:
        # Seen in CI: `agentd stop` held over 60 s with a page open, uvicorn waiting on a connection. What
        # fits: a browser reconnects an event stream that ended, 2 s later, on a connection it keeps open,
        # and one the stopping server never told to close stays busy with new streams. While stopping, a
        # stream is refused, which an EventSource does not retry; and each stream's connection closes with
        # it, so a retry needs a new one, which a stopping server no longer accepts.
        if self.stopping():
            return PlainTextResponse("agentd is stopping", status_code=503, headers={"Connection": "close"})
        headers = {"X-Accel-Buffering": "no", "Connection": "close"}
        stream = live.changes(self.store, request.app.state, self.stopping, self.board)
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


def _restore_as_shown(
    store: EventStore, artifacts: ArtifactStore, task_id: str, kind: Kind, *, only: str | None, by: str, version: int
) -> str | None:
    """The restore a person confirmed, if the task is still as it was shown to them; its id."""
    _, summary = undo.load(store, task_id)
    if summary.version != version:
        raise InvalidCommand(
            f"task {task_id} recorded something after the {kind} was shown; nothing was done. Look again and confirm."
        )
    return undo.restore(store, artifacts, task_id, kind, by=by, only=only).restore_id


async def _form(request: Request) -> dict[str, str] | None:
    """The form's fields (first value of each), or None if the body is too large or malformed."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        fields = urllib.parse.parse_qs(body.decode(), keep_blank_values=True, max_num_fields=20)
    except ValueError:  # UnicodeDecodeError is one too
        return None
    return {k: v[0] for k, v in fields.items()}


def _positive(value: str | None) -> int | None:
    """A query parameter that must be a positive number when given; ValueError otherwise."""
    if not value:
        return None
    if not value.isdigit() or int(value) == 0:
        raise ValueError(value)
    return int(value)


class _SecurityHeaders:
    """Every response gets the security headers; every one but the static files also `no-store`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)

"""The HTTP API: what the CLI and the page do, as JSON under /api/v1/, for programs that drive agentd.

Every request carries `Authorization: Bearer <token>`: a program's own token (`agentd api token
create`, revocable; the log says which program acted) or the data folder's page token. No cookie
opens it: a browser never sends the header by itself, so a page on another site cannot act here. The
page's Host check applies as well. The bodies are the CLI's `--json` output, made by the same
functions, so a program can switch between the two; `GET /api/v1/openapi.json` describes every
operation, written from the models used here.
Events come as JSON, or as a server-sent stream that resumes after the seq in `Last-Event-ID`.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from anyio import to_thread
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from runtime.artifacts import ArtifactStore
from runtime.errors import AgentdError, InvalidCommand, NotFound
from runtime.harness import approvals as deciding, tasks as task_commands, tokens, undo
from runtime.harness.task_diff import restore_json, task_diff
from runtime.output import to_jsonable
from store import EventStore, archive, log
from store.events import TaskPhase
from store.events.task import INTEGER_MAX, Granted
from store.state import TaskState, TaskSummary

PREFIX = "/api/v1"
PHASES = tuple(p.value for p in TaskPhase)
# How often the event stream looks for new events, and how long it stays quiet before a comment keeps
# proxies from closing it.
POLL_S = 0.25
PING_S = 15.0
EVENTS_LIMIT_MAX = 1000
# A request body is a goal or a message; anything larger is refused before it is parsed.
BODY_MAX = 64 * 1024


def _whole(value: Any) -> Any:
    # JSON Schema's integer is any number without a fraction (3.0 included); never a bool or a string.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# At most what a database column holds: a larger budget was a server error (found by the API's fuzz test).
Positive = Annotated[int, Field(ge=1, le=INTEGER_MAX), BeforeValidator(_whole)]


class _Body(BaseModel):
    # Strict: a body says what it means (0 is not false, "3" is not 3), and a field it should not have is refused.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SubmitRequest(_Body):
    """A task, as `agentd task submit` takes it."""

    goal: str = Field(min_length=1, max_length=20_000)
    workspace: str | None = Field(
        None, pattern=r"^/", description="An absolute folder on agentd's machine; the configured one if left out."
    )
    profile: str = "workspace"
    tenant: str = Field("default", min_length=1)
    allow: list[Granted] = Field(
        default_factory=list, description="Effects allowed besides read."
    )
    max_steps: Positive | None = None
    max_tokens: Positive | None = None
    policy: str | None = None
    context: dict[str, str] = Field(default_factory=dict)
    conversation: bool = False
    confirm_changes: bool = False


class Submitted(BaseModel):
    task_id: str
    seq: int


class SayRequest(_Body):
    text: str = Field(min_length=1, max_length=20_000)


class CancelRequest(_Body):
    reason: str = Field("cancelled through the API", min_length=1, max_length=2000)


class DecisionRequest(_Body):
    decision: Literal["approve", "deny"]
    # The hash of the arguments the caller was shown (`arguments_hash` of the listed approval): a
    # decision on other arguments is refused, as on the page.
    arguments_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    reason: str = Field("", max_length=2000)
    # Who decided, as the log will say; the caller's token name when left out.
    by: str | None = Field(None, min_length=1, max_length=200)


class RestoreRequest(_Body):
    """An undo or a redo, as `agentd task undo` takes it."""

    path: str | None = Field(None, min_length=1, description="Only this file's changes.")
    dry_run: bool = False


class Problem(BaseModel):
    error: str
    message: str


class Api:
    """The API's handlers, sharing the store, the token, and what a submitted task defaults to."""

    def __init__(
        self,
        store: EventStore,
        token: str,
        *,
        profiles: Callable[[], Mapping[str, Any]],
        workspace: Path | None,
        default_policy: str,
        stopping: Callable[[], bool],
        decided: Callable[[], None],
        artifacts: ArtifactStore | None = None,
    ) -> None:
        self.store = store
        self.artifacts = artifacts
        self.token = token
        self.profiles = profiles
        self.workspace = workspace
        self.default_policy = default_policy
        self.stopping = stopping
        self.decided = decided

    def routes(self) -> list[Route]:
        """One route per path, whatever its methods: a method it lacks gets 405 naming all it has."""
        # path -> method -> (handler, the query parameters it takes); any other parameter is refused.
        operations: dict[str, dict[str, tuple[Callable[[Request], Any], tuple[str, ...]]]] = {
            "/openapi.json": {"GET": (self.openapi, ())},
            "/tasks": {"GET": (self.list_tasks, ("phase",)), "POST": (self.submit, ())},
            "/tasks/{task_id}": {"GET": (self.show_task, ())},
            "/tasks/{task_id}/say": {"POST": (self.say, ())},
            "/tasks/{task_id}/cancel": {"POST": (self.cancel, ())},
            "/tasks/{task_id}/diff": {"GET": (self.diff, ("path",))},
            "/tasks/{task_id}/undo": {"POST": (partial(self.restore, "undo"), ())},
            "/tasks/{task_id}/redo": {"POST": (partial(self.restore, "redo"), ())},
            "/approvals": {"GET": (self.list_approvals, ("all",))},
            "/approvals/{approval_id}": {"POST": (self.decide, ())},
            "/events": {"GET": (self.events, ("after", "limit", "task"))},
            "/events/stream": {"GET": (self.stream, ("after", "task"))},
        }

        def route(path: str, by_method: dict[str, tuple[Callable[[Request], Any], tuple[str, ...]]]) -> Route:
            async def dispatch(request: Request) -> Response:
                # HEAD is answered as GET, without the body (Starlette drops it).
                handler, takes = by_method["GET" if request.method == "HEAD" else request.method]
                unknown = sorted(set(request.query_params) - set(takes))
                if unknown:
                    return problem(400, "bad_query", f"{PREFIX}{path} takes no query parameter {unknown[0]!r}"
                                   + (f" (it takes {', '.join(takes)})" if takes else ""))
                return await handler(request)

            return Route(PREFIX + path, self._authorized(dispatch), methods=list(by_method))

        return [route(path, by_method) for path, by_method in operations.items()]

    # -- access and answers ------------------------------------------------------------------------

    def _authorized(self, handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            scheme, _, offered = request.headers.get("authorization", "").partition(" ")
            caller = await self._caller(offered.strip()) if scheme.lower() == "bearer" else None
            if caller is None:
                return problem(
                    401, "unauthorized", "send Authorization: Bearer <a token of `agentd api token create`, "
                    "or the data folder's page token>", headers={"WWW-Authenticate": 'Bearer realm="agentd"'},
                )
            request.state.caller = caller
            try:
                return await handler(request)
            except NotFound as e:
                return problem(404, "not_found", str(e))
            except (InvalidCommand, AgentdError) as e:
                return problem(409, "refused", str(e))

        return endpoint

    async def _caller(self, offered: str) -> str | None:
        """Who a bearer token says the caller is: `api:NAME` for a live token of its own, `api` for the
        page token; None for anything else."""
        if not offered.isascii():
            return None
        if hmac.compare_digest(offered.encode(), self.token.encode()):
            return "api"
        name = await to_thread.run_sync(tokens.holder, self.store, offered)
        return None if name is None else f"api:{name}"

    async def _body(self, request: Request, model: type[_Body]) -> _Body | Response:
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return problem(415, "not_json", "the body must be JSON (Content-Type: application/json)")
        raw = await request.body()
        if len(raw) > BODY_MAX:
            return problem(413, "too_large", f"the body is over {BODY_MAX} bytes")
        try:
            return model.model_validate_json(raw or b"{}")
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            return problem(422, "invalid_body", f"{where}: {first['msg']}")

    # -- tasks -------------------------------------------------------------------------------------

    async def list_tasks(self, request: Request) -> Response:
        from store.queries.tasks import summaries

        phase = request.query_params.get("phase")
        if phase is not None and phase not in PHASES:
            return problem(400, "bad_query", f"phase {phase!r} is not one of {', '.join(PHASES)}")

        def read() -> list[TaskSummary]:
            with self.store.reading() as conn:
                return summaries(conn, phase=phase)

        return answer(await to_thread.run_sync(read))

    async def show_task(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        state = await to_thread.run_sync(self.store.task, task_id)
        if state is None:
            raise NotFound(f"no task {task_id!r}")
        return answer(state)

    @property
    def _secrets(self):
        return None if self.artifacts is None else self.artifacts.secrets

    async def submit(self, request: Request) -> Response:
        body = await self._body(request, SubmitRequest)
        if isinstance(body, Response):
            return body
        assert isinstance(body, SubmitRequest)
        workspace = Path(body.workspace) if body.workspace else self.workspace
        if workspace is None or not workspace.is_absolute():
            return problem(422, "invalid_body", "workspace: an absolute folder on agentd's machine is needed")
        act = partial(
            task_commands.submit, lambda: self.store, body.goal, workspace, profiles=self.profiles(),
            default_policy=self.default_policy, profile=body.profile, allowed=tuple(body.allow), policy=body.policy,
            actor=request.state.caller, tenant=body.tenant, max_steps=body.max_steps, max_tokens=body.max_tokens,
            context=body.context, conversation=body.conversation, confirm_changes=body.confirm_changes,
            secrets=self._secrets,
        )
        try:
            task_id, seq = await to_thread.run_sync(act)
        except InvalidCommand as e:
            # A well-formed body this agentd cannot take (a profile it has not loaded, a folder that is
            # not there): refused by its state, not by the schema.
            return problem(409, "refused", str(e))
        self.decided()
        return answer(Submitted(task_id=task_id, seq=seq), status=201)

    async def say(self, request: Request) -> Response:
        body = await self._body(request, SayRequest)
        if isinstance(body, Response):
            return body
        assert isinstance(body, SayRequest)
        task_id = request.path_params["task_id"]
        act = partial(task_commands.append_decided, self.store, task_id,
                      lambda records: task_commands.say(records, body.text), actor=request.state.caller,
                      secrets=self._secrets)
        records = await to_thread.run_sync(act)
        self.decided()
        return answer(Submitted(task_id=task_id, seq=records[0].seq))

    async def cancel(self, request: Request) -> Response:
        body = await self._body(request, CancelRequest)
        if isinstance(body, Response):
            return body
        assert isinstance(body, CancelRequest)
        task_id = request.path_params["task_id"]

        def act() -> int:
            state = self.store.task(task_id)
            if state is None:
                raise NotFound(f"no task {task_id!r}")
            events = task_commands.cancel_task(state, body.reason)
            return self.store.append(
                task_id, events, expected_version=state.summary.version, actor=request.state.caller
            )[-1].seq

        seq = await to_thread.run_sync(act)
        return answer(Submitted(task_id=task_id, seq=seq))

    async def diff(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        if self.artifacts is None:
            return problem(404, "not_found", "this agentd keeps no artifact store, so no diffs")
        only = request.query_params.get("path") or None
        artifacts = self.artifacts

        def read() -> list:
            return task_diff(task_id, self.store.read_stream(task_id), artifacts, only)

        return answer([s.as_json() for s in await to_thread.run_sync(read)])

    async def restore(self, kind: str, request: Request) -> Response:
        body = await self._body(request, RestoreRequest)
        if isinstance(body, Response):
            return body
        assert isinstance(body, RestoreRequest)
        if self.artifacts is None:
            return problem(404, "not_found", "this agentd keeps no artifact store, so nothing to put back")
        task_id = request.path_params["task_id"]
        act = partial(undo.restore, self.store, self.artifacts, task_id, kind, by=request.state.caller,
                      only=body.path, dry_run=body.dry_run)
        outcome = await to_thread.run_sync(act)
        return answer(restore_json(task_id, kind, body.dry_run, outcome))

    # -- approvals ---------------------------------------------------------------------------------

    async def list_approvals(self, request: Request) -> Response:
        shown = request.query_params.get("all", "false")
        if shown not in ("true", "false"):
            return problem(400, "bad_query", "all must be true or false")
        status = None if shown == "true" else "pending"
        return answer(await to_thread.run_sync(deciding.rows, self.store, status))

    async def decide(self, request: Request) -> Response:
        body = await self._body(request, DecisionRequest)
        if isinstance(body, Response):
            return body
        assert isinstance(body, DecisionRequest)
        act = partial(deciding.decide, self.store, request.path_params["approval_id"],
                      grant=body.decision == "approve", by=body.by or request.state.caller, reason=body.reason,
                      arguments_hash=body.arguments_hash)
        task_id, approval = await to_thread.run_sync(act)
        self.decided()
        return answer({"task_id": task_id, **approval._asdict()})

    # -- events ------------------------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        q = request.query_params
        try:
            after = _count(q.get("after"), 0)
            limit = _count(q.get("limit"), 100)
            if not 1 <= limit <= EVENTS_LIMIT_MAX:
                raise ValueError(limit)
        except ValueError:
            return problem(400, "bad_query", f"after must be a whole number, 0 or more, and limit one from 1 to "
                           f"{EVENTS_LIMIT_MAX}")
        task = q.get("task") or None

        def read() -> list[dict]:
            with self.store.reading() as conn:
                raws = log.iter_raw(conn, after=after, stream_id=task, types=(), limit=limit)
                return [json.loads(archive.line_of(r)) for r in raws]

        return answer(await to_thread.run_sync(read))

    async def stream(self, request: Request) -> Response:
        try:
            after = _count(request.headers.get("last-event-id") or request.query_params.get("after"), 0)
        except ValueError:
            return problem(400, "bad_query", "Last-Event-ID and after must be a seq: a whole number, 0 or more")
        task = request.query_params.get("task") or None
        return StreamingResponse(self._events_since(after, task), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def _events_since(self, after: int, task: str | None) -> AsyncIterator[str]:
        """Each event after `after` (of one task, if given) as `id: SEQ`, `event: TYPE` and the JSON line of
        `agentd events list --json`, then each new one as it is appended; a client that reconnects with the
        last id it saw in Last-Event-ID misses none and gets none twice."""
        seen = after
        yield "retry: 2000\n\n"
        quiet = 0.0
        while not self.stopping():
            def read(since: int = seen) -> list:
                with self.store.reading() as conn:
                    return list(log.iter_raw(conn, after=since, stream_id=task, types=(), limit=EVENTS_LIMIT_MAX))

            raws = await to_thread.run_sync(read)
            for r in raws:
                yield f"id: {r.seq}\nevent: {r.type}\ndata: {archive.line_of(r)}\n\n"
                seen = r.seq
            if raws:
                quiet = 0.0
                continue
            await anyio.sleep(POLL_S)
            quiet += POLL_S
            if quiet >= PING_S:
                quiet = 0.0
                yield ": ping\n\n"

    # -- the description ---------------------------------------------------------------------------

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())


def problem(status: int, error: str, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(Problem(error=error, message=message).model_dump(), status_code=status, headers=headers)


def answer(obj: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(to_jsonable(obj), status_code=status)


# The largest seq a database can hold: a larger `after` is no seq at all, and handed to the driver it
# would overflow into a server error.
SEQ_MAX = INTEGER_MAX


def _count(value: str | None, default: int) -> int:
    # Absent is the default; present and empty (`?after=`) is no whole number, as the document says.
    if value is None:
        return default
    if not value.isdigit() or int(value) > SEQ_MAX:
        raise ValueError(value)
    return int(value)


# -- OpenAPI -------------------------------------------------------------------------------------------

_EVENT = {
    "type": "object",
    "description": "One event, as `agentd events list --json` and `events export` write it.",
    "required": ["seq", "stream_id", "type", "payload"],
    "properties": {
        "seq": {"type": "integer"}, "stream_id": {"type": "string"}, "stream_version": {"type": "integer"},
        "type": {"type": "string"}, "actor": {"type": ["string", "null"]}, "recorded_at": {"type": "string"},
        "payload": {"type": "object"},
    },
}
_CHANGE = {"type": "object", "description": "One change or restore, as `agentd task diff --json` gives it.",
           "required": ["seq", "by", "path", "kind", "added", "removed", "binary", "diff"]}
_APPROVAL = {"type": "object", "description": "An approval with its task, the exact arguments and the change shown.",
             "required": ["approval_id", "task_id", "tool", "status", "arguments_hash", "arguments"]}


def openapi_document() -> dict[str, Any]:
    """OpenAPI 3.1 for /api/v1, its schemas written from the models the handlers validate and answer with."""
    components: dict[str, Any] = {}

    def ref(model: Any, name: str) -> dict[str, str]:
        schema = TypeAdapter(model).json_schema(ref_template="#/components/schemas/{model}")
        components.update(schema.pop("$defs", {}))
        components[name] = schema
        return {"$ref": f"#/components/schemas/{name}"}

    def body(model: type[BaseModel]) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": ref(model, model.__name__)}}}

    def ok(schema: dict[str, Any], status: str = "200", what: str = "Done") -> dict[str, Any]:
        return {status: {"description": what, "content": {"application/json": {"schema": schema}}}}

    problem_ref = ref(Problem, "Problem")
    problems = {str(s): {"description": d, "content": {"application/json": {"schema": problem_ref}}} for s, d in (
        (400, "A query parameter the operation does not take, or a bad value"),
        (401, "No or a wrong bearer token"), (404, "No such task or approval"),
        (409, "Refused by the task's or the approval's state"), (413, "The body is over 64 KiB"),
        (415, "The body is not JSON"),
        (422, "The body does not validate"))}
    submitted = ref(Submitted, "Submitted")
    task_id = [{"name": "task_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    paths = {
        "/tasks": {
            "get": {"operationId": "listTasks", "summary": "Tasks, oldest first",
                    "parameters": [{"name": "phase", "in": "query",
                                    "schema": {"type": "string", "enum": list(PHASES)}}],
                    "responses": {**ok({"type": "array", "items": ref(TaskSummary, "TaskSummary")}), **problems}},
            "post": {"operationId": "submitTask", "summary": "Submit a task", "requestBody": body(SubmitRequest),
                     "responses": {**ok(submitted, "201", "Submitted"), **problems}},
        },
        "/tasks/{task_id}": {"get": {
            "operationId": "showTask", "summary": "One task's state, actions, approvals and artifacts",
            "parameters": task_id, "responses": {**ok(ref(TaskState, "TaskState")), **problems}}},
        "/tasks/{task_id}/say": {"post": {
            "operationId": "say", "summary": "A message from the user to a task", "parameters": task_id,
            "requestBody": body(SayRequest), "responses": {**ok(submitted), **problems}}},
        "/tasks/{task_id}/cancel": {"post": {
            "operationId": "cancelTask", "summary": "Cancel a task that has not finished", "parameters": task_id,
            "requestBody": body(CancelRequest), "responses": {**ok(submitted), **problems}}},
        "/tasks/{task_id}/diff": {"get": {
            "operationId": "taskDiff", "summary": "Every change the task made, file by file, in the order made",
            "parameters": [*task_id, {"name": "path", "in": "query", "schema": {"type": "string"}}],
            "responses": {**ok({"type": "array", "items": _CHANGE}), **problems}}},
        **{f"/tasks/{{task_id}}/{kind}": {"post": {
            "operationId": f"{kind}Task", "summary": f"{kind.capitalize()} the task's changes, as agentd task {kind}",
            "parameters": task_id, "requestBody": body(RestoreRequest),
            "responses": {**ok({"type": "object"}), **problems}}} for kind in ("undo", "redo")},
        "/approvals": {"get": {
            "operationId": "listApprovals", "summary": "Pending approvals (all with all=true)",
            "parameters": [{"name": "all", "in": "query", "schema": {"type": "string", "enum": ["true", "false"]}}],
            "responses": {**ok({"type": "array", "items": _APPROVAL}), **problems}}},
        "/approvals/{approval_id}": {"post": {
            "operationId": "decideApproval", "summary": "Approve or deny, for the arguments shown",
            "parameters": [{"name": "approval_id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "requestBody": body(DecisionRequest), "responses": {**ok({"type": "object"}), **problems}}},
        "/events": {"get": {
            "operationId": "listEvents", "summary": "Events after a seq, oldest first",
            "parameters": [{"name": n, "in": "query", "schema": s} for n, s in (
                ("after", {"type": "integer", "minimum": 0, "maximum": SEQ_MAX}),
                ("limit", {"type": "integer", "minimum": 1, "maximum": EVENTS_LIMIT_MAX}),
                ("task", {"type": "string"}))],
            "responses": {**ok({"type": "array", "items": _EVENT}), **problems}}},
        "/events/stream": {"get": {
            "operationId": "streamEvents",
            "summary": "Server-sent events, resumed after the seq in Last-Event-ID",
            "parameters": [{"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                           {"name": "task", "in": "query", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "text/event-stream: id is the seq, event the type, data the event",
                                  "content": {"text/event-stream": {"schema": {"type": "string"}}}}, **problems}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "agentd", "version": "1",
                 "description": "Tasks, approvals and the event log of one agentd, as JSON."},
        "servers": [{"url": PREFIX}],
        "paths": paths,
        "components": {"schemas": components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }

"""Running one tool call: validate, authorize, run under a deadline, check, retry what is safe, mask what is long."""

from __future__ import annotations

import contextvars
import dataclasses
import json
import threading
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from runtime import logs
from runtime.secrets import UnknownSecret
from runtime.tools.contract import Tool, ToolContext, ToolFailure, ToolRefused
from store.errors import AgentdError
from store.events import Event, ToolCallExecuted

log = logs.get_logger("agentd.tools")

MASK_CHARS = 2000
# A cancelled call gets this long to clean up (kill its process group) before the executor returns.
GRACE_S = 0.5
MESSAGE_CHARS = 500
MAX_ATTEMPTS = 2

# The last two are never the executor's: the loop records them for a call it did not run.
Status = Literal["ok", "error", "timeout", "invalid_arguments", "refused", "denied", "outcome_unknown"]

# Codes the executor answers with on any tool's behalf, for the prompt's legend of errors.
EXECUTOR_ERRORS = {
    "approval_required": "the tool needs a person's approval first; nothing ran",
    "invalid_arguments": "the arguments do not match the tool's input schema; nothing ran",
    "postcondition_failed": "the tool ran but its result broke its contract; do not rely on it",
    "not_allowed": "the tool exists but is not offered in this step; nothing ran",
    "timeout": "the tool did not finish within its timeout_s",
    "tool_error": "the tool failed and said why in the message",
    "unexpected_error": "the tool failed in a way its contract does not describe",
    "unknown_tool": "there is no tool by that name; nothing ran",
}


@dataclasses.dataclass(frozen=True)
class ToolOutcome:
    """What one call came to. `observation` is what the model sees; the rest is for the runtime and the log."""

    tool: str
    status: Status
    observation: dict[str, Any]
    artifact_ref: str | None = None
    output: BaseModel | None = None
    attempts: int = 0
    elapsed_s: float = 0.0
    artifact_events: tuple[Event, ...] = ()
    error: str | None = None

    @classmethod
    def refusal(cls, tool: str, failure: ToolFailure) -> ToolOutcome:
        """An outcome for a call that never reached a tool, such as one naming a tool that does not exist."""
        observation = {"tool": tool, "status": "refused", "error": failure.code, "message": _clip(failure.message)}
        if failure.details:
            observation["details"] = failure.details
        return cls(tool=tool, status="refused", observation=observation, error=failure.code)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def executed(self, call_id: str) -> ToolCallExecuted:
        """The log event for this outcome; append `artifact_events` with it."""
        return ToolCallExecuted(
            call_id=call_id,
            tool=self.tool,
            status=self.status,
            observation=self.observation,
            artifact_ref=self.artifact_ref,
            attempts=self.attempts,
            elapsed_s=round(self.elapsed_s, 4),
        )


@dataclasses.dataclass
class _Attempt:
    status: Status
    output: BaseModel | None = None
    failure: ToolFailure | None = None
    events: list[Event] = dataclasses.field(default_factory=list)


def execute(
    tool: Tool,
    ctx: ToolContext,
    raw_args: Any,
    *,
    approved: bool = False,
    mask_chars: int = MASK_CHARS,
) -> ToolOutcome:
    """Run `tool` once (twice if it is idempotent and the first try failed) and say honestly what happened.

    Never raises for anything the tool or its arguments do. Nothing runs unless the arguments
    validate as they are (no missing argument is filled in) and `authorize` lets them through; a
    tool whose contract needs approval runs only when the caller passes `approved=True`.
    """
    contract = tool.contract
    started = time.monotonic()

    def done(attempt: _Attempt, attempts: int, events: list[Event]) -> ToolOutcome:
        return _outcome(tool, ctx, attempt, attempts, events, started, mask_chars)

    try:
        # The values go back in here and nowhere earlier: what was proposed, approved and recorded keeps
        # the placeholders, and only the tool itself is handed the secret.
        if ctx.secrets is not None:
            raw_args = ctx.secrets.reveal(raw_args)
        args = _parse(contract.input_model, raw_args)
    except UnknownSecret as e:
        return done(_Attempt("invalid_arguments", failure=ToolFailure("invalid_arguments", str(e))), 0, [])
    except ToolFailure as failure:
        return done(_Attempt("invalid_arguments", failure=failure), 0, [])

    if contract.needs_approval and not approved:
        refusal = ToolRefused("approval_required", f"{contract.name} needs a person's approval before it runs")
        return done(_Attempt("refused", failure=refusal), 0, [])

    refused = _authorized(tool, ctx, args)
    if refused is not None:
        return done(refused, 0, [])

    events: list[Event] = []
    attempts = 0
    while True:
        attempts += 1
        attempt = _attempt(tool, ctx, args)
        events.extend(attempt.events)
        retry = contract.idempotent and attempts < MAX_ATTEMPTS and _transient(attempt)
        if not retry:
            return done(attempt, attempts, events)
        code = attempt.failure.code if attempt.failure else None
        log.info("tool.retry", tool=contract.name, status=attempt.status, error=code)


def screen(tool: Tool, ctx: ToolContext, raw_args: Any) -> ToolOutcome | None:
    """The checks no person's approval can lift, made before a call waits for one: its arguments against
    the schema, and `authorize`. A call they refuse is refused at once (its outcome returned), so nobody
    is asked to approve a call that could not run, nor shown arguments a check keeps from leaving (an
    MCP call carrying a secret). None when the call may go on to its approval; `execute` checks again."""
    started = time.monotonic()
    try:
        args = _parse(tool.contract.input_model, raw_args)
    except ToolFailure as failure:
        return _outcome(tool, ctx, _Attempt("invalid_arguments", failure=failure), 0, [], started, MASK_CHARS)
    refused = _authorized(tool, ctx, args)
    return None if refused is None else _outcome(tool, ctx, refused, 0, [], started, MASK_CHARS)


def _authorized(tool: Tool, ctx: ToolContext, args: BaseModel) -> _Attempt | None:
    try:
        tool.authorize(ctx, args)
    except Exception as e:  # noqa: BLE001  any failure to authorize refuses; it must not run by accident
        return _Attempt("refused", failure=_as_failure(e, tool, refused=True))
    return None


def _transient(attempt: _Attempt) -> bool:
    """Worth a second try: a timeout or a failure the contract does not describe. A declared error
    (not_found, binary_file, ...) would only come back the same."""
    if attempt.status == "timeout":
        return True
    return attempt.status == "error" and (attempt.failure is None or attempt.failure.code == "unexpected_error")


def _parse(model: type[BaseModel], raw_args: Any) -> BaseModel:
    if not isinstance(raw_args, Mapping):
        raise ToolFailure("invalid_arguments", f"arguments must be a JSON object, not {type(raw_args).__name__}")
    try:
        payload = json.dumps(dict(raw_args))
    except (TypeError, ValueError) as e:
        raise ToolFailure("invalid_arguments", f"arguments are not JSON data: {e}") from None
    try:
        # Strict, from JSON: "5" is not an int and 5 is not a str. A model that means 5 says 5.
        return model.model_validate_json(payload, strict=True)
    except ValidationError as e:
        raise ToolFailure("invalid_arguments", _validation_message(e)) from None


def _attempt(tool: Tool, ctx: ToolContext, args: BaseModel) -> _Attempt:
    contract = tool.contract
    call = ctx.for_call(contract.timeout_s)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["output"] = tool.run(call, args)
        except BaseException as e:  # noqa: BLE001  whatever it was, the worker reports it instead of dying
            box["error"] = e

    # A worker thread, so a tool that hangs costs its timeout and not the agent; daemon, so a
    # tool stuck in C code cannot keep the process alive at exit either.
    worker = threading.Thread(
        target=contextvars.copy_context().run, args=(target,), name=f"tool:{contract.name}", daemon=True
    )
    worker.start()
    worker.join(contract.timeout_s)
    if worker.is_alive():
        call.cancelled.set()
        worker.join(GRACE_S)
        own = box.get("error")
        if isinstance(own, ToolFailure) and own.code == "timeout":
            # The tool stopped itself and said what it had done by then; its word is the better report.
            return _Attempt("timeout", failure=own, events=list(call.trail))
        stopped = "it was stopped" if not worker.is_alive() else "it may still be running"
        failure = ToolFailure("timeout", f"{contract.name} did not finish within {contract.timeout_s:g}s; {stopped}")
        return _Attempt("timeout", failure=failure, events=list(call.trail))

    events = list(call.trail)
    if "error" in box:
        failure = _as_failure(box["error"], tool)
        status: Status = "refused" if isinstance(failure, ToolRefused) else "error"
        if failure.code == "timeout":
            status = "timeout"
        elif status == "error" and call.should_stop() and not isinstance(box["error"], ToolFailure):
            # It gave up because its time was up (should_stop() turned true at the deadline) and ended
            # just before join() returned: a timeout all the same, whichever thread the machine ran first.
            failure = ToolFailure(
                "timeout", f"{contract.name} did not finish within {contract.timeout_s:g}s; it was stopped"
            )
            status = "timeout"
        return _Attempt(status, failure=failure, events=events)
    if "output" not in box:
        failure = ToolFailure("unexpected_error", "the tool ended without a result")
        return _Attempt("error", failure=failure, events=events)

    try:
        output = _validated_output(contract.output_model, box["output"])
        tool.check(output)
    except Exception as e:  # noqa: BLE001  a check that crashes has not shown the result is good
        if isinstance(e, ToolFailure):
            detail = e.message
        elif isinstance(e, ValidationError):
            detail = _validation_message(e)
        else:
            detail = _exception_text(e)
        failure = ToolFailure("postcondition_failed", detail)
        return _Attempt("error", failure=failure, events=events)
    return _Attempt("ok", output=output, events=events)


def _validated_output(model: type[BaseModel], output: Any) -> BaseModel:
    if isinstance(output, model):
        # Re-validated: model_construct or a mutated instance would otherwise slip past the constraints.
        return model.model_validate(output.model_dump())
    if isinstance(output, Mapping):
        return model.model_validate(dict(output))
    raise ToolFailure("postcondition_failed", f"returned {type(output).__name__}, not {model.__name__}")


def _as_failure(e: BaseException, tool: Tool, *, refused: bool = False) -> ToolFailure:
    if isinstance(e, ToolFailure):
        if refused and not isinstance(e, ToolRefused):
            return ToolRefused(e.code, e.message, e.details)
        return e
    if isinstance(e, ValidationError) and e.title == tool.contract.output_model.__name__:
        # The tool tried to build a result its own output model rejects.
        return ToolFailure("postcondition_failed", _validation_message(e))
    if isinstance(e, AgentdError):
        code = "not_authorized" if refused else "tool_error"
        return (ToolRefused if refused else ToolFailure)(code, str(e))
    log.warning("tool.crashed", tool=tool.contract.name, exc_info=e)
    return (ToolRefused if refused else ToolFailure)("unexpected_error", _exception_text(e))


def _outcome(
    tool: Tool,
    ctx: ToolContext,
    attempt: _Attempt,
    attempts: int,
    events: list[Event],
    started: float,
    mask_chars: int,
) -> ToolOutcome:
    name = tool.contract.name
    observation: dict[str, Any] = {"tool": name, "status": attempt.status}
    artifact_ref = None
    if attempt.output is not None:
        observation, artifact_ref = _observe(tool, ctx, attempt.output, mask_chars)
    elif attempt.failure is not None:
        observation["error"] = attempt.failure.code
        observation["message"] = _clip(attempt.failure.message)
        if attempt.failure.details:
            observation["details"] = attempt.failure.details
    if attempts > 1:
        observation["attempts"] = attempts
    if ctx.secrets is not None:
        # A file it read, a key it printed, a message quoting the arguments: the model sees placeholders.
        observation = ctx.secrets.hide_all(observation)
    return ToolOutcome(
        tool=name,
        status=attempt.status,
        observation=observation,
        artifact_ref=artifact_ref,
        output=attempt.output,
        attempts=attempts,
        elapsed_s=round(time.monotonic() - started, 3),
        artifact_events=tuple(events),
        error=attempt.failure.code if attempt.failure else None,
    )


def _observe(tool: Tool, ctx: ToolContext, output: BaseModel, mask_chars: int) -> tuple[dict[str, Any], str | None]:
    """The output itself when short; otherwise its summary and a ref to the full output in the artifact store."""
    full = output.model_dump(mode="json")
    text = json.dumps(full, ensure_ascii=False)
    head = {"tool": tool.contract.name, "status": "ok"}
    if not tool.contract.mask_output or len(text) <= mask_chars:
        return {**head, **full}, None
    observation = {**head, **tool.summarize(output), "truncated": True, "full_chars": len(text)}
    if ctx.secrets is not None:
        text = ctx.secrets.hide(text)
    try:
        ref = ctx.artifacts.put(text.encode())
    except OSError as e:
        # The call itself succeeded; only the full output is lost, and the observation says so.
        log.error("tool.artifact_failed", tool=tool.contract.name, error=str(e))
        return {**observation, "artifact_ref": None, "details": {"artifact_error": e.strerror or str(e)}}, None
    return {**observation, "artifact_ref": ref}, ref


def _validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    return _clip("; ".join(parts))


def _exception_text(e: BaseException) -> str:
    text = str(e)
    return _clip(f"{type(e).__name__}: {text}" if text else type(e).__name__)


def _clip(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."

"""An MCP server's tool as agentd pins it and calls it: a Tool whose contract comes from the pinned
definition and the config's terms, run by the executor like every built-in tool."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from runtime.canonical import canonical_json
from runtime.mcp import FACT_MCP_PINNED, result
from runtime.mcp.secret import leaked
from runtime.mcp_settings import Terms
from runtime.skills.review import instruction_flags
from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure, ToolRefused
from store.events import PinnedTool

ERRORS = {
    "secret_in_arguments": "an argument holds the value of one of agentd's secrets; nothing was sent",
    "tool_changed": "the server changed this tool's definition since the task started; nothing was sent",
    "server_unavailable": "the MCP server is down, crashed or answered garbage; the message says which",
    "invalid_result": "the server's result breaks the tool's pinned output schema",
}

EARLY_S = 0.25

# A tool's call as the connection makes it: server, tool, arguments, timeout -> the SDK's CallToolResult.
Caller = Callable[[str, str, dict[str, Any], float], Any]


def digest(name: str, description: str, input_schema: Mapping, output_schema: Mapping | None) -> str:
    """What a server may change behind a task's back, hashed: the name, the description, both schemas."""
    text = canonical_json({"name": name, "description": description, "input_schema": input_schema,
                           "output_schema": output_schema})
    return hashlib.sha256(text.encode()).hexdigest()


def pinned(server: str, listed: Any, terms: Terms) -> PinnedTool:
    """A tool from a server's list (the SDK's Tool) as a task pins it."""
    schema = dict(listed.input_schema or {})
    # An argument-less tool may declare `{"type": "object"}` alone; the grammar needs its properties.
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    output = dict(listed.output_schema) if listed.output_schema else None
    description = (listed.description or listed.title or listed.name).strip()
    return PinnedTool(
        server=server, name=listed.name, description=description, input_schema=schema, output_schema=output,
        sha256=digest(listed.name, description, schema, output),
        effects=terms.effects, needs_approval=terms.approval, scope=terms.scope, timeout_s=terms.timeout_s,
    )


def arguments_model(entry: PinnedTool) -> type[BaseModel]:
    """A model that takes exactly the arguments the pinned input schema allows, validated by that schema
    (not the server's current one), and describes itself with that schema."""
    schema = entry.input_schema

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")

        arguments: dict[str, Any]

        @model_validator(mode="before")
        @classmethod
        def _against_pinned(cls, data: Any) -> Any:
            if not isinstance(data, Mapping):
                raise ValueError("arguments must be a JSON object")
            problem = result.schema_error(schema, dict(data))
            if problem is not None:
                raise ValueError(f"against {entry.name}'s input schema: {problem}")
            return {"arguments": dict(data)}

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(schema)

    Arguments.__name__ = f"{entry.name}_arguments"
    return Arguments


def contract_of(entry: PinnedTool) -> ToolContract:
    """The contract of a pinned tool: what its task was shown, whatever its server lists now."""
    return ToolContract(
        name=entry.name,
        description=entry.description,
        input_model=arguments_model(entry),
        output_model=result.McpResult,
        effects=[Effect(e) for e in entry.effects],
        idempotent=False,  # a server's call may do anything; never sent twice by agentd's retry
        needs_approval=entry.needs_approval,
        scope=entry.scope,
        timeout_s=entry.timeout_s,
        errors=ERRORS,
        summary_fields=("server", "flagged"),
    )


class McpTool(Tool[BaseModel, result.McpResult]):
    """Check 1 in `authorize` (beside the executor's schema validation, rights and approvals), the call
    through the server's connection in `run`, check 2 on the result before the executor masks it."""

    def __init__(self, entry: PinnedTool, call: Caller, secrets: Mapping[str, str], live: Callable[[], str | None]):
        self.entry = entry
        self._call = call
        self._secrets = dict(secrets)
        # The sha256 the server's current list gives this tool; None once it left the list.
        self._live = live
        self.contract = contract_of(entry)

    @property
    def server(self) -> str:
        return self.entry.server

    def authorize(self, ctx: ToolContext, args: BaseModel) -> None:
        names = leaked(args.arguments, self._secrets)
        if names:
            raise ToolRefused(
                "secret_in_arguments",
                f"the arguments hold the value of {', '.join(names)} from agentd's environment; "
                f"nothing was sent to {self.server}",
                {"variables": names},
            )
        started_with = ctx.facts.get(FACT_MCP_PINNED, {}).get(self.name, self.entry.sha256)
        now = self._live()
        if started_with != self.entry.sha256 or now != started_with:
            raise ToolRefused(
                "tool_changed",
                f"{self.server} changed or removed {self.name} since this task started; nothing was sent",
                {"server": self.server},
            )

    def run(self, ctx: ToolContext, args: BaseModel) -> result.McpResult:
        # The server's time runs out a little before the executor's, so the call is cancelled and the
        # task reads this tool's own account of it rather than a worker abandoned mid-wait.
        left = ctx.remaining()
        budget = self.entry.timeout_s if left is None else max(left - EARLY_S, 0.1)
        try:
            answer = self._call(self.server, self.name, args.arguments, budget)
        except ToolFailure as e:
            if e.code != "timeout":
                raise
            raise ToolFailure(
                "timeout", f"MCP server {self.server} did not answer {self.name} within {self.entry.timeout_s:g}s; "
                "the call was cancelled"
            ) from None
        text = result.text_of(list(answer.content or []))
        if answer.is_error:
            raise ToolFailure("tool_error", f"{self.server} answered with an error: {text or 'no text'}")
        structured = answer.structured_content
        result.check_structured(self.name, self.entry.output_schema, structured)
        found = instruction_flags(text)
        if structured is not None:
            found += instruction_flags(canonical_json(structured))
        return result.McpResult(
            server=self.server, content=text, structured_content=structured, flagged=list(dict.fromkeys(found))
        )

    def summarize(self, output: result.McpResult) -> dict[str, Any]:
        return result.summary(output)

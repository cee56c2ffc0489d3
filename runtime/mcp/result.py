"""Check 2: what an MCP tool's result may become before the model reads it.

The text is taken from the result's content blocks (other kinds are named, never inlined), scanned
for instruction-like phrases with the same patterns skill review uses, and its structured content is
validated against the output schema the task pinned, not the one the server declares now. The size
cap and the fence are the executor's and the context's, as for every tool: a long result goes to the
artifact store behind a ref, and every result is shown inside an untrusted <data> block.
"""

from __future__ import annotations

from typing import Any

from jsonschema import SchemaError
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for
from pydantic import BaseModel, Field
from referencing import Registry
from referencing.exceptions import Unresolvable

from runtime.tools.contract import ToolFailure

# Characters of a long result's text the observation keeps beside its artifact ref.
HEAD_CHARS = 1200


class McpResult(BaseModel):
    """An MCP tool's result as agentd passes it on: which server answered, its text, its structured
    content, and the instruction-like phrases found in either."""

    server: str
    content: str = ""
    structured_content: dict[str, Any] | None = None
    flagged: list[str] = Field(default_factory=list, description="instruction-like phrases, each with its reason")


def text_of(blocks: list[Any]) -> str:
    """The text of the content blocks; an image, audio or a link is named, not inlined."""
    parts = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", ""))
            parts.append(f"[{kind}, {getattr(block, 'mime_type', '?')}, {size} base64 chars]")
        else:
            parts.append(f"[{kind or type(block).__name__} content]")
    return "\n".join(parts)


def check_structured(tool: str, schema: dict[str, Any] | None, structured: Any) -> None:
    """Raise ToolFailure unless `structured` is what the pinned output schema allows."""
    if schema is None:
        return
    if structured is None:
        raise ToolFailure("invalid_result", f"{tool} declares an output schema but returned no structured content")
    failure = schema_error(schema, structured)
    if failure is not None:
        raise ToolFailure("invalid_result", f"{tool}'s structured content breaks its pinned output schema: {failure}")


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` is not a JSON Schema agentd can check values against, or None."""
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as e:
        return f"is not valid JSON Schema: {e.message}"
    return None


def schema_error(schema: dict[str, Any], value: Any) -> str | None:
    """Why `value` does not match `schema`, or None. `$ref`s resolve within the schema only: a
    server's schema must not make agentd fetch anything."""
    try:
        validator_cls = validator_for(schema)
        validator_cls.check_schema(schema)
        error = best_match(validator_cls(schema, registry=Registry()).iter_errors(value))
    except SchemaError as e:
        return f"the schema itself is invalid: {e.message}"
    except Unresolvable as e:
        return f"the schema has a reference that does not resolve: {e}"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def summary(output: McpResult) -> dict[str, Any]:
    """What a masked observation keeps: the server, the flags and the head of the text."""
    head = output.content[:HEAD_CHARS]
    return {"server": output.server, "flagged": output.flagged, "content_head": head}

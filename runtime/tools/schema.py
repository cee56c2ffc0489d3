"""JSON schemas of tool models, inlined, so prompts stay short and llama.cpp's grammar converter can resolve them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

# Values under these keywords are data, not schemas: a property named "title" or an enum of dicts is left alone.
_VERBATIM = frozenset({"const", "default", "enum", "examples", "required"})
# These map names to schemas; the names are not keywords.
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "dependentSchemas"})


def inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema with every `$ref` replaced by its target and every `title` dropped.

    llama.cpp resolves `$ref`s only against the document root, and a fragment embedded in a bigger
    schema has moved away from its root; titles only repeat the field names and cost tokens.
    """
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    return _inline(schema, defs, ())


def _inline(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    ref = node.get("$ref")
    if ref is not None:
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            raise ValueError(f"schema reference {ref!r} is recursive or unknown; tool models must be plain trees")
        out.update(_inline(defs[name], defs, (*seen, name)))
    for key, value in node.items():
        if key in ("$ref", "title"):
            continue
        if key in _VERBATIM:
            out[key] = value
        elif key in _NAMED_SCHEMAS:
            out[key] = {name: _inline(sub, defs, seen) for name, sub in value.items()}
        else:
            out[key] = _inline(value, defs, seen)
    return out

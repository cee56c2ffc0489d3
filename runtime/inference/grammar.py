"""The grammar llama.cpp samples a proposal under: a JSON schema turned into GBNF, once per schema."""

from __future__ import annotations

import functools
import json
from typing import Any

from runtime.errors import InferenceError

GBNF_CACHE_SIZE = 64


@functools.lru_cache(maxsize=GBNF_CACHE_SIZE)
def _gbnf_for_schema_text(schema_text: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(schema_text)


# llama.cpp's converter spells out every position of a bound as nested optional rules; bounds in the
# thousands (a path, a file's content) make a grammar llama.cpp refuses. Those are left to validation
# after the call (and to max_tokens); short ones stay, so a thought stays short.
GRAMMAR_MAX_BOUND = 256
_BOUNDS = frozenset({"maxLength", "minLength", "maxItems", "minItems", "maxProperties"})
# Values under these keywords are data, not schemas: a property named "maxLength" or an enum of dicts is left alone.
_VERBATIM = frozenset({"const", "default", "enum", "examples", "required"})
# These map names to schemas; the names are not keywords.
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "dependentSchemas"})


def grammar_schema(node: Any) -> Any:
    """`node` (a JSON schema) without the bounds too large for a grammar; shape, enums and short bounds stay."""
    if isinstance(node, list):
        return [grammar_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _BOUNDS and isinstance(value, int) and value > GRAMMAR_MAX_BOUND:
            continue
        if key in _VERBATIM:
            out[key] = value
        elif key in _NAMED_SCHEMAS:
            out[key] = {name: grammar_schema(sub) for name, sub in value.items()}
        else:
            out[key] = grammar_schema(value)
    return out


# llama-cpp-python's converter lets a JSON string hold raw control characters (its `char` is [^"\\]):
# seen here, an answer with a literal line break, which json.loads refuses, failed a task whose file
# edit had already succeeded. JSON allows no control character unescaped; llama.cpp's own json.gbnf
# says so, and so does the grammar here.
_LOOSE_CHAR = r'char ::= [^"\\] |'
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'


def schema_grammar(schema: dict) -> str:
    """The GBNF grammar llama.cpp samples under for `schema`, converted once per distinct schema text."""
    # No sort_keys: property order in the schema is the order the model must write them in.
    text = json.dumps(grammar_schema(schema), ensure_ascii=False, separators=(",", ":"))
    try:
        return _gbnf_for_schema_text(text).replace(_LOOSE_CHAR, _JSON_CHAR)
    except Exception as e:
        raise InferenceError(f"the JSON schema cannot be turned into a grammar: {e}") from e

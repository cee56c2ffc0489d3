"""Check 1's last part: no secret of agentd's own environment leaves in a call's arguments.

A secret is the value of an environment variable whose name says it is one (the markers the shell
tool already keeps from commands: KEY, TOKEN, SECRET, PASSWORD, ...), at least MIN_CHARS long. The
length bound is deliberate: a short value (`1`, `yes`, `dev`) would match ordinary arguments and
refuse calls for nothing, while a real key or token is long. A value is found anywhere in any string
of the arguments, however deep, so a key pasted into a sentence is caught as well as one alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from runtime.tools.shell import SECRET_MARKERS

MIN_CHARS = 8


def secrets_of(environ: Mapping[str, str]) -> dict[str, str]:
    """Variable name -> value, for every variable that holds a secret by the definition above."""
    return {
        name: value
        for name, value in environ.items()
        if any(marker in name.upper() for marker in SECRET_MARKERS) and len(value.strip()) >= MIN_CHARS
    }


def leaked(arguments: Any, secrets: Mapping[str, str]) -> list[str]:
    """The names of the variables whose values appear in `arguments` (never the values themselves)."""
    texts = list(_strings(arguments))
    return sorted(name for name, value in secrets.items() if any(value.strip() in text for text in texts))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)

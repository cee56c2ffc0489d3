"""What `events export --redact` writes in place of each event's payload: its secrets as `[redacted:KIND]`.

A task's events already hold placeholders, never values; this is for the rest. An event recorded before
the vault, a stream no task owns (a schedule's goal, a notification's text), a secret one of today's
patterns finds and the day's did not. Strings are rewritten, never keys, numbers or the JSON's shape, so
each event still decodes as its type and the file replays; a payload with nothing to hide is written as
stored, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from runtime.secrets.patterns import SECRETS, Pattern, redacted


def redactor(patterns: Sequence[Pattern] = ()) -> Callable[[str], str]:
    """The payload rewrite for `store.archive.export`, with the configured patterns after the built-in ones."""
    every = (*SECRETS, *patterns)

    def text(value: str) -> str:
        return redacted(value, every)[0]

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    def payload(stored: str) -> str:
        data = json.loads(stored)
        redacted = walk(data)
        if redacted == data:
            return stored
        return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))

    return payload

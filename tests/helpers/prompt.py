"""Prompts and an output schema for calls on the model itself, long enough to show what its cache keeps."""

from __future__ import annotations

SCHEMA = {
    "type": "object",
    "properties": {"action": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
    "required": ["action", "n"],
}


def rules(topic: str, count: int) -> str:
    """A long, distinct system prompt: `count` numbered rules about `topic`."""
    rule = "Rule {i}: when the {topic} request number {i} arrives, log it and answer briefly."
    return "\n".join(rule.format(i=i, topic=topic) for i in range(count))

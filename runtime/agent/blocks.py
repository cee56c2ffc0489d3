"""Blocks: the labelled pieces a request is assembled from, and how each is rendered with its trust.

Trusted blocks render as `<label>...</label>` sections. Untrusted material (file contents, tool
output, retrieved text, the user's pasted goal) renders inside a `<data>` fence that says it is data.
Text inside a fence cannot close the fence or open a chat turn: the fence's closing tag and the
model's special-token markers are neutralised first. Nothing in any block grants anything, though:
rights and approvals are checked in code against the store.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from store.events.call import ItemKind, Trust

# "<|im_start|>" and friends: a file that contains one must not start a new chat turn when the
# rendered prompt is tokenized with special tokens parsed.
_SPECIAL = re.compile(r"<\|([^|<>\s]{1,40})\|>")
_FENCE_CLOSE = re.compile(r"</\s*data\s*>", re.IGNORECASE)
_LABEL = re.compile(r"[^a-z0-9_.:@#/-]+")


@dataclass(frozen=True)
class Block:
    label: str
    kind: ItemKind
    source: str
    trust: Trust
    text: str
    version: str | None = None
    # Instruction-like phrases found in untrusted text, for the manifest; they change nothing rendered.
    flags: tuple[str, ...] = ()
    # What a ranked block scored (evidence), for the manifest; it changes nothing rendered.
    utility: float | None = None

    def render(self) -> str:
        if self.trust == "trusted":
            tag = _tag(self.label)
            return f"<{tag}>\n{self.text}\n</{tag}>"
        version = f' version="{self.version}"' if self.version else ""
        return (
            f'<data id="{_attr(self.label)}" source="{_attr(self.source)}"{version} trust="untrusted">\n'
            f"{neutralize(self.text)}\n</data>"
        )

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.render().encode()).hexdigest()


def neutralize(text: str) -> str:
    """Untrusted text, unable to end its fence or to spell a special token."""
    text = _SPECIAL.sub(lambda m: f"<| {m.group(1)} |>", text)
    return _FENCE_CLOSE.sub("</ data>", text)


def _tag(label: str) -> str:
    return _LABEL.sub("_", label.lower().split(":", 1)[0]) or "section"


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def join(blocks: list[Block]) -> str:
    return "\n\n".join(b.render() for b in blocks)


def call_of(b: Block) -> str | None:
    """The call a step line or a result block belongs to (`step:c3`, `result:c3` -> `c3`)."""
    for prefix in ("step:", "result:"):
        if b.label.startswith(prefix):
            return b.label.removeprefix(prefix)
    return None


def step_calls(entries) -> list[str]:
    """The call ids of a history's steps, in order."""
    return [b.label.removeprefix("step:") for b in entries if b.label.startswith("step:")]

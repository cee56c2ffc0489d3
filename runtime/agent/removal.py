"""Changes that would remove lines a request only asked to add to: told before they run, once.

A request that asks only to add ("Add the line ... to todo.txt", "append", "insert") leaves every line
of the file in place. Seen on the default model: `edit_file {"old": "buy milk", "new": "- water the
plants"}` for such a request, and a write of the new line alone over the list. Which text a call
removes is read from its contract (`removes`: the argument whose text goes unless another repeats
it, or the whole file replaced by one argument) and from the file's content as the task last saw it;
such a call is refused with the lines it would remove and the tools that add instead. A request that
also asks to change, replace, remove, fix or move anything is not one that only adds, and any call
may remove what it asks.

Pure: the request, the contract, the arguments and the log in; a reason or None out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.tools import ToolContract
from store.events import FileChanged, Recorded, ToolCallExecuted

_ADD = re.compile(r"\b(?:add|adds|adding|append|appends|appending|insert|inserts|inserting|include)\b", re.IGNORECASE)
# Words that ask for something besides adding: then a removal may be what was asked.
_OTHER = re.compile(
    r"\b(?:change|replace|remove|delete|drop|rename|fix|correct|update|set|bump|edit|modify|rewrite|move|sort|swap|"
    r"clear|reset|turn|mark|increase|decrease|raise|lower|tidy|clean|merge|split|reorder|overwrite|instead)\b",
    re.IGNORECASE,
)
MARKER = "which the request did not ask to remove"
SHOWN = 3


def only_adds(request: str) -> bool:
    """Whether the user's words ask to add and nothing else."""
    return bool(_ADD.search(request)) and not _OTHER.search(request)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def removed(contract: ToolContract, arguments: Mapping[str, Any], known: str | None) -> list[str]:
    """The lines a call would take out of its file: those of the text it replaces that the replacement
    does not repeat. `known` is the file's content as the task last saw it (for a whole-file write)."""
    if contract.removes is None:
        return []
    gone, kept = contract.removes
    replacement = arguments.get(kept)
    if not isinstance(replacement, str):
        return []
    text = known if not gone else arguments.get(gone)
    if not isinstance(text, str):
        return []
    if gone and text in replacement:
        return []
    left = set(_lines(replacement))
    return [line for line in _lines(text) if line not in left]


def known_content(records: Sequence[Recorded], path: str) -> str | None:
    """The file's whole content as the task's results last showed it (a read's content, an edit's file
    after); None when no result showed it whole, or a change came after that did not show it."""
    content: str | None = None
    whole: dict[str, bool] = {}
    for rec in records:
        e = rec.event
        if isinstance(e, ToolCallExecuted) and e.status == "ok" and e.observation.get("path") == path:
            shown = e.observation.get("content", e.observation.get("file_after"))
            whole[e.call_id] = isinstance(shown, str) and not e.observation.get("truncated")
            if whole[e.call_id]:
                content = shown
        elif isinstance(e, FileChanged) and e.path == path and not whole.get(e.call_id, False):
            content = None
    return content


def refusal(
    request: str,
    contract: ToolContract,
    arguments: Mapping[str, Any],
    records: Sequence[Recorded],
    adders: Sequence[str] = (),
) -> str | None:
    """Why the call is refused before it runs, if the request only asks to add and the call would
    remove lines of the file; None otherwise. `adders` are the tools offered that add to a file and
    remove nothing (by their contracts), which the reason names."""
    if not only_adds(request) or contract.removes is None:
        return None
    path = arguments.get("path")
    known = known_content(records, path) if isinstance(path, str) and not contract.removes[0] else None
    lines = removed(contract, arguments, known)
    if not lines:
        return None
    shown = ", ".join(repr(line) for line in lines[:SHOWN])
    if len(lines) > SHOWN:
        shown += f" and {len(lines) - SHOWN} more"
    instead = f"use {' or '.join(adders)}" if adders else "give the old text again with the new lines"
    return f"this {contract.name} would remove {shown} from {path}, {MARKER}: to add lines, {instead}"

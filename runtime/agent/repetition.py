"""A call that would add lines its file already has is told so before it runs.

Seen on the default model on a generated suite: asked to add one row to a CSV file, it appended the
rows it had just read (nine of the file's rows a second time) and answered that the row was added. A
call that adds (its contract's `adds` argument) and repeats lines the file holds, at least REPEATED of
them and most of what it adds, copies the file rather than adding to it. One line repeated (an item
the user asks to list again) is the request's business, not a copy.

Read from the contract, the arguments and the file as the task's log last left it (removal.known_content).
Pure: the contract, the arguments, the log and a lookup of stored bytes by hash in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime.agent.removal import known_content
from runtime.artifacts import Fetch
from runtime.tools import ToolContract
from store.events import Recorded

# The fewest lines a call must repeat to be taken for a copy.
REPEATED = 2
SHOWN = 2


def repeated(contract: ToolContract, arguments: Mapping[str, Any], known: str | None) -> list[str]:
    """The lines a call would add that its file already has, when they are most of what it adds."""
    text = arguments.get(contract.adds) if contract.adds else None
    if not isinstance(text, str) or known is None:
        return []
    has = {line.strip() for line in known.splitlines() if line.strip()}
    adding = [line.strip() for line in text.splitlines() if line.strip()]
    again = [line for line in adding if line in has]
    return again if len(again) >= REPEATED and 2 * len(again) > len(adding) else []


def refusal(
    contract: ToolContract, arguments: Mapping[str, Any], records: Sequence[Recorded], fetch: Fetch | None = None
) -> str | None:
    """Why the call is refused before it runs, if it would add lines its file already has; None otherwise."""
    path = arguments.get("path")
    if contract.adds is None or not isinstance(path, str):
        return None
    again = repeated(contract, arguments, known_content(records, path, fetch))
    if not again:
        return None
    shown = ", ".join(repr(line) for line in again[:SHOWN])
    if len(again) > SHOWN:
        shown += f" and {len(again) - SHOWN} more"
    return (
        f"this {contract.name} would add {shown} to {path}, which it already has: give {contract.adds} only the "
        "new lines the request asks for"
    )

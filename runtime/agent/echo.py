"""A call that would write agentd's own words into a file is refused before it runs.

Seen on the default model on a generated suite: asked to copy the first item of a todo list into
next.txt, it edited next.txt to end with append_file's description, "add lines at the end of a text file
in the workspace, keeping everything it has. Use it to add an item to a list, ...", and the task
completed. agentd's words (the tools' descriptions, the instructions, the decision asked for) are the
request's frame, never the user's content: a line a call puts in a file that holds a run of RUN of their
words in a row is refused, unless the run is the user's too (in the request, or in anything a tool
showed the task, where a file may well quote agentd).

Read from the contract (which argument a call puts in: `adds`, or the second of `removes`), the
arguments, the log and agentd's words in the request. Pure: no I/O but the lookup of stored bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime.agent.claims import runs
from runtime.agent.removal import known_content, removed
from runtime.artifacts import Fetch
from runtime.tools import ToolContract
from store.events import Recorded, ToolCallExecuted

# Words in a row that make a line agentd's: longer than the phrases plain prose shares with any text.
RUN = 8


def put_lines(contract: ToolContract, arguments: Mapping[str, Any], known: str | None) -> list[str]:
    """The lines a call would put in its file that the file does not have: all of an added text, the
    new lines of a replacement, every line of a file written whole where its old content is unknown."""
    if contract.adds is not None:
        text = arguments.get(contract.adds)
        return [line for line in text.splitlines() if line.strip()] if isinstance(text, str) else []
    if contract.removes is None:
        return []
    gone, kept = contract.removes
    text = arguments.get(kept)
    if not gone and known is None:
        return [line for line in text.splitlines() if line.strip()] if isinstance(text, str) else []
    return removed(contract, arguments, known)[1]


def refusal(
    contract: ToolContract,
    arguments: Mapping[str, Any],
    records: Sequence[Recorded],
    said: Sequence[str],
    request: str,
    fetch: Fetch | None = None,
) -> str | None:
    """Why the call is refused before it runs, if a line it would put in its file copies agentd's words;
    None otherwise."""
    path = arguments.get("path")
    if not said or not isinstance(path, str):
        return None
    lines = put_lines(contract, arguments, known_content(records, path, fetch))
    if not lines:
        return None
    agentds = set().union(*(runs(text, RUN) for text in said))
    copied = [(line, runs(line, RUN) & agentds) for line in lines]
    copied = [(line, found) for line, found in copied if found]
    if not copied:
        return None
    theirs = runs(request, RUN)
    for rec in records:
        if isinstance(rec.event, ToolCallExecuted):
            for text in _texts(rec.event.observation):
                theirs |= runs(text, RUN)
    for line, found in copied:
        if found - theirs:
            return (
                f"this {contract.name} would put agentd's own words in {path}: \"{_clip(line.strip())}\" is from the "
                "instructions or a tool's description, not from the request or the files; write only the text the "
                "request asks for"
            )
    return None


def _texts(value: Any) -> list[str]:
    """Every string inside a tool's result, each whole: a file's content keeps its lines apart."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _texts(v)]
    return []


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."

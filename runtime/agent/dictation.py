"""A call that would put a text the request dictates in a file, but not as the request gives it, is
refused once before it runs, with the text as given.

Seen on the default model on two unseen suites: "Create a file hello.txt that says: birddesk is ready
for review." wrote "birddesk is ready for review", the sentence without its stop, and the task
completed. The user dictated the words; a file that holds them with another case, other spacing or
another stop at the end is not what was dictated. The refusal quotes the text, which a small model
copies well; a second call that still differs is let through (the judge does not argue twice).

Read from the request (`claims.asked_in`: the texts it dictates), the contract (which argument a call
puts in), the arguments and the log. Pure: no I/O but the lookup of stored bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.agent.claims import asked_in
from runtime.agent.echo import put_lines
from runtime.agent.removal import known_content
from runtime.artifacts import Fetch
from runtime.tools import ToolContract
from store.events import Recorded

# What the refusal says, which `rules.not_the_refused_again` reads: the retry may call the same tool.
AS_GIVEN = "write it exactly as the request gives it"
# What may differ in a text written loosely: case, runs of spaces, and the stops and quotes at its ends.
_ENDS = " \t.!?;:,'\"`"


def _loose(text: str) -> str:
    return " ".join(text.split()).casefold().strip(_ENDS)


def near(text: str, line: str) -> bool:
    """Whether `line` holds `text` loosely (see `_loose`) as whole words, and not as it is given."""
    if text in line:
        return False
    loose = _loose(text)
    return bool(loose) and re.search(rf"(?<!\w){re.escape(loose)}(?!\w)", _loose(line)) is not None


def refusal(
    contract: ToolContract,
    arguments: Mapping[str, Any],
    records: Sequence[Recorded],
    request: str,
    last_rejection: str = "",
    fetch: Fetch | None = None,
) -> str | None:
    """Why the call is refused before it runs, if a line it would put in its file holds a text the
    request dictates, but not as given; None otherwise, and after one such refusal."""
    path = arguments.get("path")
    if AS_GIVEN in last_rejection or not isinstance(path, str):
        return None
    texts = asked_in(request)
    if not texts:
        return None
    lines = put_lines(contract, arguments, known_content(records, path, fetch))
    for text in texts:
        if any(text in line for line in lines):
            continue
        loosely = next((line for line in lines if near(text, line)), None)
        if loosely is not None:
            return (
                f'this {contract.name} would put "{_clip(loosely.strip())}" in {path}, but the request dictates '
                f'"{text}": {AS_GIVEN}'
            )
    return None


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."

"""A request that asks where something is written is answered with a file, not with what the file says.

Asked "Which file says where the nightly backups go?" or "One of the files mentions Northwind Storage.
Which one?", the default model answered with the content it found ("Northwind Storage") in 7 of the
8 such cases of an unseen generated seed, and in the held-out project "Where does this project keep
its release notes?" was answered "in the workspace" with CHANGELOG.md in the listing it was shown.
Whether an answer names a file is a fact code can check against the paths the task's own tool results
reported; which file is right stays the model's judgement.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from runtime.agent.claims import since_message
from store.events import ProposalRejected, Recorded, ToolCallExecuted

# "which file", "what config file", "which of the files", "in which document".
_WHICH_FILE = re.compile(
    r"\b(?:which|what)\s+(?:of\s+(?:the|these|those|my|our)\s+)?(?:[\w-]+\s+)?(?:files?|documents?)\b",
    re.IGNORECASE,
)
# "Which one?" after the request spoke of files.
_WHICH_ONE = re.compile(r"\bwhich\s+one\b", re.IGNORECASE)
_FILES = re.compile(r"\b(?:files?|documents?)\b", re.IGNORECASE)
# "Where is it written that ...", "where is the port configured", "where does it keep its notes".
_WHERE_WRITTEN = re.compile(
    r"\bwhere\b[^.?!\n]{0,60}?\b(?:written|mentioned|said|stated|documented|noted|recorded|defined|declared|"
    r"configured|specified|set|kept|keeps?|stored|listed)\b",
    re.IGNORECASE,
)


def asks_for_file(request: str) -> bool:
    """Whether the user's words ask which file (or folder) holds something, rather than what it holds."""
    if _WHICH_FILE.search(request) or _WHERE_WRITTEN.search(request):
        return True
    return bool(_WHICH_ONE.search(request) and _FILES.search(request))


def _paths(value: Any) -> Iterator[str]:
    """Every `path` a tool's result reports, at any depth: a listing's entries, a search's matches, the
    file a read returned. The built-in tools and the contract's examples all name a workspace path so."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "path" and isinstance(item, str) and item not in (".", ""):
                yield item
            else:
                yield from _paths(item)
    elif isinstance(value, list):
        for item in value:
            yield from _paths(item)


def seen_paths(records: Sequence[Recorded]) -> list[str]:
    """The workspace paths the task's successful calls reported since the user's latest message, each
    once: the files a call returned (a read) first, in the order read, then those a listing or a search
    named."""
    results = [
        rec.event.observation
        for rec in since_message(records)
        if isinstance(rec.event, ToolCallExecuted) and rec.event.status == "ok"
    ]
    own = [o["path"] for o in results if isinstance(o.get("path"), str) and o["path"] not in (".", "")]
    named = [p for o in results for k, v in o.items() if k != "path" for p in _paths(v)]
    return list(dict.fromkeys([*own, *named]))


def names_one(answer: str, paths: Sequence[str]) -> bool:
    """Whether `answer` names one of `paths`, whole or by its last part ("backup.md" for
    "ops/backup.md"), as a word of its own."""
    said = answer.lower()
    for path in paths:
        for name in {path, path.rpartition("/")[2]}:
            if name and re.search(rf"(?<![\w/.-]){re.escape(name.lower())}(?![\w-]|\.\w)", said):
                return True
    return False


def unnamed(answer: str, request: str, records: Sequence[Recorded]) -> str | None:
    """Why `answer` does not stand yet: the request asks which file, the task's calls reported files,
    and the answer names none of them. None when it may stand."""
    if not asks_for_file(request):
        return None
    paths = seen_paths(records)
    if not paths or names_one(answer, paths):
        return None
    shown = ", ".join(paths[:SHOWN]) + (", ..." if len(paths) > SHOWN else "")
    return (
        f"the request asks which file; the answer names none of the files your calls reported ({shown}); "
        f"{UNNAMED}"
    )


# The paths a refusal names: those read come first, and one of them is most often the answer.
SHOWN = 8
# The paths an answer may open with: a folder's listing may name many, and each is a grammar rule.
OPENINGS = 40


def refused(records: Sequence[Recorded]) -> bool:
    """Whether an answer to the user's latest message was refused for naming no file."""
    return any(isinstance(r.event, ProposalRejected) and UNNAMED in r.event.error for r in since_message(records))


def answer_opens(request: str, records: Sequence[Recorded]) -> tuple[str, ...]:
    """The texts an answer must open with: once an answer to a request asking which file was refused
    for naming none, the paths the task's calls reported (the grammar then cannot leave the file out;
    which one stays the model's choice). Empty where the answer is free."""
    if not asks_for_file(request) or not refused(records):
        return ()
    return tuple(seen_paths(records)[:OPENINGS])


# The words every such refusal ends with: it is made once, and the answer after it stands.
UNNAMED = "answer with the path of the file that says it"

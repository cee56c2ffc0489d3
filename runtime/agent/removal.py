"""A call that would remove lines the request does not touch is told so before it runs.

Seen on the default model: for 'Add the line "- water the plants" to todo.txt' it ran `edit_file
{"old": "buy milk", "new": "- water the plants"}`, saw the diff, and answered that the line was added;
another run wrote the new line alone over the list. A line a change removes is one the request
touches when every word it loses is one the request names, one corrected in its place (a typo fixed),
or the value of a field the request names (a port, a version); a line that loses no word but
changes all the same (its list marker or a comma gone) is touched only when the request names it by a
word of it: one few of the file's lines hold, which the change did not bring. Any other line removed is a loss the
user did not ask for, and the call is refused with the lines and the tools that add without removing.
A request that asks to remove, clear, move or rewrite, or to replace a whole file or list, is taken at
its word: nothing is refused. Lines the task itself put in the file (a file it created, a line it
added) are its own to change.

What a call removes is read from its contract (`removes`: the argument whose text goes unless another
repeats it, or the whole file replaced by one argument), applied to the file as the task's log last
left it: the content its results showed, or the bytes its own last change put there, which the
artifact store keeps under their hash. The effect is judged line by line on the whole file, not on the
arguments: seen on the default model on an unseen suite, `edit_file {"old": "8", "new": "19"}` for
"The retries should be 19 instead of 8" also turned `"port": 9840` into `"port": 91940`. Where the
file's content is not known, the arguments alone are judged. Pure: the request, the contract, the
arguments, the log and a lookup of stored bytes by hash in.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from runtime.artifacts import Fetch
from runtime.tools import ToolContract
from runtime.tools.replacement import replace
from store.events import FileChanged, Recorded, ToolCallExecuted

# Requests that ask for lines to go, or for a whole text to be put in other words: any removal may be
# meant. "Replace" only of a whole or a part named by its place ("replace the list", "the first item"):
# "replace 8080 with 9090" names what goes, and a request to use a port "instead of 8080" does not ask
# for the rest of the file to go (seen on the default model: the port written alone over config/app.toml).
_REMOVING = re.compile(
    r"\b(?:remove|removes|delete|deletes|drop|clear|empty|erase|wipe|truncate|strip|purge|prune|"
    r"rewrite|overwrite|reword|rephrase|shorten|simplify|condense|translate|reformat|restructure|"
    r"reorgani[sz]e|redo|move|moves)\b"
    r"|\breplace\s+(?:the\s+|its\s+|all\s+)?(?:whole\s+|entire\s+|first\s+|last\s+|second\s+|third\s+|top\s+|"
    r"bottom\s+)?(?:contents?|file|list|everything|text|item|line|entry|row|paragraph|sentence|section)\b",
    re.IGNORECASE,
)
# A token of a line: a word, a number, a version, an address.
_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.@/-]*")
# A word the request may name a line by; shorter ones (a, is, to) name nothing.
_WORD = re.compile(r"[a-z0-9]{2,}")
# A lost word this alike to one put in its place was corrected, not lost ("recieve", "receive": 0.86).
TYPO = 0.8
# The shortest word that names a line whose words all stay: "send", "bold", not "the" or "my".
NAMING = 4
# A word held by more of a file's lines than this (or a quarter of them, in a long file) names none of them.
FEW = 2
MARKER = "which the request does not touch"
# A line of this many tokens, none left after the change, was deleted (a lone value, "8080", may be replaced).
DELETED = 2
SHOWN = 3


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _tokens(text: str) -> list[str]:
    return [t.strip(".-/") for t in _TOKEN.findall(text.lower()) if t.strip(".-/")]


def removed(contract: ToolContract, arguments: Mapping[str, Any], known: str | None) -> tuple[list[str], list[str]]:
    """The lines a call would take out of its file, and the lines it would put in. `known` is the
    file's content as the task's log last left it: where it is known, the call's effect on the whole
    file is compared line by line; where not, the text it replaces with the replacement."""
    if contract.removes is None:
        return [], []
    gone, kept = contract.removes
    replacement = arguments.get(kept)
    if not isinstance(replacement, str):
        return [], []
    if not gone:
        return _difference(known, replacement) if known is not None else ([], [])
    text = arguments.get(gone)
    if not isinstance(text, str) or not text:
        return [], []
    if known is not None and text in known:
        return _difference(known, replace(known, text, replacement)[0])
    if text in replacement:
        return [], []
    return _difference(text, replacement)


def _difference(before: str, after: str) -> tuple[list[str], list[str]]:
    """The lines of `before` that `after` no longer has, and those `after` has new, each as many times
    as it went or came (two equal lines and one of them deleted is a line gone)."""
    was, now = Counter(_lines(before)), Counter(_lines(after))
    return list((was - now).elements()), list((now - was).elements())


def untouched(
    request: str, gone: Sequence[str], added: Sequence[str], known: str | None = None
) -> list[str]:
    """The removed lines the request does not touch. Each token a line loses (one the lines put in its
    place do not have) must be named by the request, be corrected (a word put in its place is nearly the
    same), or be the value of a field the request names (the token before it: "port" in "port = 8080",
    "version" in "version: 0.7.4"). Two records of one list look alike ('{"name": "Marta", ...}' and
    '{"name": "Tomas", ...}' are 0.86 alike as text), so a line's likeness alone says nothing. `known` is
    the file as it was, whose other lines a line may have been joined with."""
    asked = set(_WORD.findall(request.lower()))
    others = [line for line in (_lines(known) if known is not None else gone) if len(_tokens(line)) >= DELETED]
    put = {t for line in added for t in _tokens(line)}
    words_put = {w for t in put for w in _WORD.findall(t)}
    naming = _naming(request, gone, added, _lines(known) if known is not None else gone)
    lost_lines = []
    for line in gone:
        tokens = _tokens(line)
        if len(tokens) >= DELETED and not any(t in put for t in tokens):
            # Nothing of the line is left anywhere: deleted, not changed, and only a request that asks for
            # lines to go deletes one. Its words named by the request say nothing then: seen on the
            # default model, "Add a row: id 553, date ..., station ..." named every word of the CSV
            # file's header, and the file was written back without it.
            lost_lines.append(line)
            continue
        for i, token in enumerate(tokens):
            if token in put:
                continue
            words = _WORD.findall(token)
            named = bool(words) and all(w in asked for w in words)
            corrected = token.isalpha() and any(
                w.isalpha() and difflib.SequenceMatcher(None, token, w).ratio() >= TYPO for w in words_put
            )
            # A key of several words ("timeout_seconds", "log-level") is named by naming each of them.
            field = i > 0 and bool(key := _WORD.findall(tokens[i - 1])) and all(w in asked for w in key)
            if not (named or corrected or field or not words):
                lost_lines.append(line)
                break
        else:
            # Every word kept, the line not: a list marker, a comma or a quote gone, words joined to
            # another line. Unless the request names the line by a word of it (one that can name
            # something: "the" and "to" cannot), that is a change nobody asked for (seen: an add request
            # wrote the list back without its "- " markers).
            # A line put in one line with another of the file's is not named by any word, whichever the
            # request names: seen on the default model on an unseen suite, "Add a row: ..., observer Mila"
            # and an edit that joined the other seven rows onto the first one, whose observer was Mila too.
            if all(t in put for t in tokens) and (_joined(line, added, others) or not any(
                n in naming for n in _names(line)
            )):
                lost_lines.append(line)
    return lost_lines


def _naming(request: str, gone: Sequence[str], added: Sequence[str], lines: Sequence[str]) -> set[str]:
    """The request's words and tokens (a date, a version) that can name one line of the file: long enough
    to name anything, held by few of its lines, and not put in by the change itself.

    Seen on the default model on an unseen suite: asked to add a row whose observer was Femke, it ran
    `edit_file` with a row `823,...,Femke` as its old text and that row with `,4,Femke` on the end as its
    new. The request's "Femke" is in four of the file's six rows and came in with the change: it names
    the new row, not the one changed, and neither does a year every row holds."""
    asked = set(_names(request))
    came = Counter(n for line in added for n in _names(line))
    came.subtract(n for line in gone for n in _names(line))
    held = Counter(n for line in lines for n in set(_names(line)))
    most = max(FEW, len(lines) // 4)
    return {n for n in asked if len(n) >= NAMING and came[n] <= 0 and held[n] <= most}


def _names(text: str) -> list[str]:
    """The tokens of a text and the words inside them: "2026-04-28" and "2026"."""
    return [n for t in _tokens(text) for n in {t, *_WORD.findall(t)}]


def _joined(line: str, added: Sequence[str], others: Sequence[str]) -> bool:
    """Whether a line put in holds `line` and another of the file's lines as well."""
    return any(line in new and any(other != line and other in new for other in others) for new in added)


def known_content(records: Sequence[Recorded], path: str, fetch: Fetch | None = None) -> str | None:
    """The file's whole content as the task's log last left it: a result that showed it whole (a read's
    content, an edit's file after), or the bytes a change put there, fetched by their hash. None when
    neither is known (a change not shown whole and no store to fetch from, a file deleted or binary)."""
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
            content = _text(fetch, e.after_sha256)
    return content


def _text(fetch: Fetch | None, sha256: str | None) -> str | None:
    data = fetch(sha256) if fetch is not None and sha256 is not None else None
    try:
        return data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        return None


def own_lines(records: Sequence[Recorded], path: str) -> set[str] | None:
    """The lines of the file that the task itself put there, from the diffs its results showed; None
    when the task created the file, whose every line is then its own to change."""
    own: set[str] = set()
    results: dict[str, ToolCallExecuted] = {}
    for rec in records:
        e = rec.event
        if isinstance(e, ToolCallExecuted):
            results[e.call_id] = e
        elif isinstance(e, FileChanged) and e.path == path:
            if e.before_sha256 is None:
                return None
            shown = results.get(e.call_id)
            text = shown.observation.get("diff") if shown is not None else None
            if isinstance(text, str):
                own |= {line[1:].strip() for line in text.splitlines() if line.startswith("+") and line[1:].strip()}
    return own


def refusal(
    request: str,
    contract: ToolContract,
    arguments: Mapping[str, Any],
    records: Sequence[Recorded],
    adders: Sequence[str] = (),
    fetch: Fetch | None = None,
    replacers: Sequence[str] = (),
) -> str | None:
    """Why the call is refused before it runs, if it would remove lines the request does not touch;
    None otherwise. `adders` are the tools offered that add to a file and remove nothing, `replacers`
    those that replace a part of it (by their contracts), which the reason names; `fetch` finds the
    bytes a change left by their hash."""
    if contract.removes is None or _REMOVING.search(request):
        return None
    path = arguments.get("path")
    if not isinstance(path, str):
        return None
    own = own_lines(records, path)
    if own is None:
        return None
    known = known_content(records, path, fetch)
    gone, added = removed(contract, arguments, known)
    lost = untouched(request, [line for line in gone if line not in own], added, known)
    if not lost:
        return None
    shown = ", ".join(repr(line) for line in lost[:SHOWN])
    if len(lost) > SHOWN:
        shown += f" and {len(lost) - SHOWN} more"
    part, whole = contract.removes
    if part:
        # Seen: old "8" for a retries value also changed the port 9840.
        narrow = f"give {part} only the text to change, as the file has it"
    elif replacers:
        # Seen: a rename refused as a whole-file write was then appended as a second function.
        narrow = f"to change part of the file, use {' or '.join(replacers)}"
    else:
        narrow = f"give {whole} the whole file, every line kept that the request does not change"
    instead = f"use {' or '.join(adders)}" if adders else "give the old text again with the new lines"
    return (
        f"this {contract.name} would remove {shown} from {path}, {MARKER}: change only what the request asks; "
        f"{narrow}; to add lines, {instead}"
    )

"""What an answer claims, checked in code against what the task recorded and what it was told.

The checks read the task's events and the request's own instruction texts, never the case:

- An answer that reports a change (a file created, changed, added, fixed, renamed, bumped, deleted,
  written, a command run, or the request as a whole done) when the task, since the user's latest
  message, recorded no change to any file and no call with an outside effect succeeded. Seen on the
  default model: "The project version was bumped to 0.8.0" after edit_file had failed with
  text_not_found, and the task completed.
- An answer that reports a change that takes text out (renamed, replaced, fixed, bumped, removed)
  when every change the task made only added lines. Seen on the default model on an unseen suite: asked
  to rename a function, it appended a second function under the new name and answered that the function
  "was renamed to gather_records and updated where it is called".
- An answer that names the text it took out ("corrected 'recieve' to 'receive'", "changed the port
  from 8080 to 9090") when that text is, in every file the task changed that had it, there as often
  as before (see `taken_out`, `still_there`). Seen on the default model: a typo "corrected" with the
  typo still in README.md.
- An answer that reports a change while the field the request asks a value for ("Set retries to 11")
  has it on no line of the files the task changed, or on a line put in beside the field's old one
  (see `not_set`). Seen on the default model on unseen suites: `"retries": 9` turned into `"11": 9`,
  and a second `timeout_seconds` line appended under the first.
- An answer that reports a change while the text the request dictates a file is to hold ("Add 'water
  the plants' to todo.txt", "a file hello.txt that says: Hello!") is in no file the task changed (see
  `asked_in`, `not_put`). Seen on the default model on unseen suites: a new file written with a line of
  its own making.
- A note of a change with no one who made it ("timeout_seconds changed: 1 line added"), or a file named
  by the change ("the modified stats.py file"), is a claim like any other.
- An answer that copies agentd's own words (a tool's description, the instructions, the decision
  asked for) instead of answering. Seen: "Create or replace one text file in the workspace..." as the
  whole answer to "Create CONTRIBUTORS.txt listing Mila and Joost", with no file written.
- An answer that is the request handed back, word for word or nearly (see `restates`), or a text it
  quotes handed back whole (see `quotes_back`).
- An answer that says nothing of what the program it ran printed: a short output with numbers in it, none
  of them in the answer (see `unquoted`). Refused once; the answer after it stands.
- An answer that is data, not a sentence: a JSON object or list, as a tool's result is written, or a
  JSON object cut short. Seen: `{"status": "ok", "lines": 124}` as the whole answer to a write task that
  had changed nothing.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from runtime.artifacts import Fetch
from store.events import FileChanged, Recorded, TaskSubmitted, ToolCallExecuted, ToolCallStarted, UserSaid

# Verbs that report a change made, in the forms a report takes ("was bumped", "I have created",
# "successfully updated", "Created X"). A verb in the present ("creates") or an infinitive after a
# modal ("to create", "can rename") is a plan or a description, not a claim.
_CHANGED = (
    "created|changed|added|appended|inserted|fixed|corrected|renamed|bumped|updated|modified|edited|deleted|"
    "removed|replaced|wrote|written|rewrote|rewritten|saved|set|moved|ran|run|executed|applied|increased|"
    "decreased|incremented|replaced|put"
)
_REPORTER = (
    r"(?:i|i've|i have|we|we've|we have|has been|have been|had been|was|were|is now|are now|has|have|"
    r"successfully|now|just|already)"
)
_CLAIM = re.compile(rf"\b{_REPORTER}\s+(?:\w+\s+)?({_CHANGED})\b|^\s*({_CHANGED})\b", re.IGNORECASE)
# A report in a note's style, a file or setting named and then the verb, with no one who did it:
# "timeout_seconds changed: 1 line added", "todo.txt updated." Seen on the default model as the whole
# answer after a second `timeout_seconds` line was appended under the first. Only a name with a dot, an
# underscore or a slash opens one: "Sales increased." is a statement about data, not a change reported.
_NOTED = re.compile(
    rf"^\s*(?:the\s+)?(?:file\s+)?[\w-]*[._/][\w./-]*\w\s+(?:file\s+|setting\s+)?({_CHANGED})\b\s*(?:[:,(]|$)",
    re.IGNORECASE,
)
# A change named as done by the thing it made, a participle before a file: "The final answer is the
# modified src/birdlog/stats.py file", "see the updated todo.txt". Seen on the default model on an unseen
# suite as the whole answer to a rename that changed nothing. Only a file opens one (the word "file" or
# a name with a dot or a slash): "the updated figures" is a statement about data.
_MADE_AS = "created|changed|modified|updated|edited|corrected|fixed|renamed|rewritten|written|saved"
_MADE = re.compile(
    rf"\b(?:the|a|an|your|my|this)\s+(?:newly\s+)?({_MADE_AS})\s+(?:file\b|[\w-]*[./][\w./-]*\w)",
    re.IGNORECASE,
)
# A report that the work as a whole succeeded ("the request was successfully processed", "Task completed")
# claims the change the request asked for as surely as "was updated" does. Seen on the default model as
# the whole answer to an append that never ran. Checked only where the task may change files.
_FINISHED = "processed|completed|complete|done|fulfilled|carried out|handled|accomplished|performed|finished"
_SUCCESS = re.compile(
    rf"\b(?:request|task|change|changes|update|updates|edit|edits|job|work|operation|instruction|instructions)\b"
    rf"(?:\s+[\w']+){{0,3}}?\s+(?:{_FINISHED})\b"
    rf"|\b(?:i|i've|i have|we|we've|we have|successfully)\s+(?:\w+\s+)?(?:{_FINISHED})\b"
    rf"|^\s*(?:done|completed|finished)\b",
    re.IGNORECASE,
)
# A clause that says something was not done, could not be, or would be: not a claim of a change.
_NEGATION = re.compile(
    r"\b(?:not|no|nothing|never|none|cannot|can't|couldn't|didn't|doesn't|don't|wasn't|weren't|isn't|aren't|"
    r"hasn't|haven't|unable|failed|fail|without|instead|would|could|should|need|needs|needed|must|will|if|"
    r"unless|already)\b",
    re.IGNORECASE,
)
# A sentence ends at a stop followed by a space (not inside "0.8.0" or "todo.txt").
_CLAUSE = re.compile(r"[.;!?]+(?=\s|$)|\n+|,\s*(?:but|and|so|because|since|as)\b", re.IGNORECASE)


# Verbs whose change takes text out of a file: a change that only added lines did none of them.
_TAKING = frozenset(
    "renamed replaced fixed corrected bumped deleted removed rewrote rewritten moved increased decreased "
    "incremented".split()
)


def _claims(answer: str) -> Iterator[tuple[str, str | None]]:
    """Each clause of `answer` that reports a change as made, with its verb where it names one."""
    for clause in _CLAUSE.split(answer):
        for pattern in (_CLAIM, _NOTED, _MADE, _SUCCESS):
            match = pattern.search(clause)
            if match and not _NEGATION.search(clause[: match.end()]):
                verb = next((g for g in match.groups() if g), None) if pattern is not _SUCCESS else None
                yield clause.strip(), verb.lower() if verb else None
                break


def claimed_change(answer: str) -> str | None:
    """The first clause of `answer` that reports a change as made, or None."""
    return next((clause for clause, _ in _claims(answer)), None)


# The effects of a call that changes something: files, the world outside, or what agentd remembers.
CHANGING = frozenset({"write", "external", "memory"})


@dataclass(frozen=True)
class Effects:
    """What the task did since the user's latest message: files changed, calls with an outside effect
    that succeeded, and the calls that meant to change something and did not."""

    changed: tuple[str, ...]
    acted: tuple[str, ...]
    failed: tuple[str, ...]

    @property
    def any(self) -> bool:
        return bool(self.changed or self.acted)


def since_message(records: Sequence[Recorded]) -> Sequence[Recorded]:
    """The task's events from its latest user message on: what an answer to that message may claim."""
    start = max((i for i, r in enumerate(records) if isinstance(r.event, (TaskSubmitted, UserSaid))), default=0)
    return records[start:]


def effects(records: Sequence[Recorded]) -> Effects:
    """The task's effects since its latest user message, read from its events."""
    changing: dict[str, frozenset[str]] = {}
    changed: list[str] = []
    acted: list[str] = []
    failed: list[str] = []
    for rec in since_message(records):
        e = rec.event
        if isinstance(e, ToolCallStarted):
            changing[e.call_id] = frozenset(e.effects) & CHANGING
        elif isinstance(e, FileChanged):
            changed.append(e.path)
        elif isinstance(e, ToolCallExecuted):
            kinds = changing.get(e.call_id, frozenset())
            # An outside effect or a memory recorded changes no file the log names: the call is the act.
            if e.status == "ok" and kinds & {"external", "memory"}:
                acted.append(e.tool)
            elif e.status != "ok" and (kinds or e.status in ("refused", "denied", "invalid_arguments")):
                error = e.observation.get("error") or e.status
                how = f"was {e.status}" if e.status in ("refused", "denied") else "failed"
                failed.append(f"{e.tool} {how}: {error}")
    return Effects(tuple(dict.fromkeys(changed)), tuple(dict.fromkeys(acted)), tuple(failed))


def unbacked(answer: str, records: Sequence[Recorded], fetch: Fetch | None = None, request: str = "") -> str | None:
    """Why `answer` may not stand: it reports a change and the log holds none, or it reports text taken
    out and every change only added lines (read from the bytes before and after, which `fetch` finds by
    hash), or text taken out that is still there: the text it names, or where it names none, the text
    the request (the user's latest message, in their own words) asked out. None when it may."""
    claimed = list(_claims(answer))
    if not claimed:
        return None
    # The checks below each read the changed files' bytes: read once, from the artifact store.
    fetch = functools.cache(fetch) if fetch is not None else None
    done = effects(records)
    if not done.any:
        why = "; ".join(done.failed[-2:]) if done.failed else "no tool changed anything"
        return f'the answer says "{_clip(claimed[0][0])}", but {why}; {UNBACKED}'
    if done.acted:
        return None
    taking = next((clause for clause, verb in claimed if verb in _TAKING), None)
    if taking is not None and _only_added(records, fetch):
        return (
            f'the answer says "{_clip(taking)}", but the task only added lines to {", ".join(done.changed)}; '
            f"nothing in them was replaced or removed, so {UNBACKED}"
        )
    asked = asked_out(request)
    for clause, verb in claimed:
        named = taken_out(clause)
        # A claim that names no text of its own, of taking out or of the request done, claims what the
        # request asked out: "The spelling mistake has been corrected" of "fix the typo 'recieve'".
        kept = still_there(named or (asked if verb is None or verb in _TAKING else []), records, fetch)
        if kept is not None:
            text, path = kept
            return (
                f'the answer says "{_clip(clause)}", but {path} has "{_clip(text, 40)}" as often as before the '
                f"task: where it stands, {UNBACKED}"
            )
    unset = not_set(asked_set(request), records, fetch) or not_put(asked_in(request), records, fetch)
    if unset is not None:
        return f'the answer says "{_clip(claimed[0][0])}", but {unset}: where it stands, {UNBACKED}'
    return None


# The words every unbacked claim's reason ends with: a second claim after one is refused fails the task.
UNBACKED = "nothing was changed"


def _only_added(records: Sequence[Recorded], fetch: Fetch | None) -> bool:
    """Whether every file change since the latest user message kept every line the file had; False when a
    change's bytes are not to be found (nothing can be said of it)."""
    if fetch is None:
        return False
    for rec in since_message(records):
        e = rec.event
        if not isinstance(e, FileChanged) or e.before_sha256 is None:
            continue
        if e.after_sha256 is None:
            return False
        before, after = fetch(e.before_sha256), fetch(e.after_sha256)
        if before is None or after is None:
            return False
        if Counter(before.splitlines()) - Counter(after.splitlines()):
            return False
    return True


# Quoted text, in the quotes a reply uses.
_QUOTED = r"""['"`\u2018\u201c]([^'"`\u2019\u201d\n]{1,80})['"`\u2019\u201d]"""
# The text a clause says went out: "from X to Y", or a quoted 'X' to, with or into Y (Y in the second
# group), or a quoted 'X' right after the verb ("removed 'debug'", "fixed the typo 'recieve'"). A bare
# word before "to" is not read: in "bumped the version to 0.8.0" it is what changed, not what went.
_SWAP = re.compile(
    rf"\bfrom\s+(?:{_QUOTED}|([^\s,;'\"`]+))\s+(?:to|into)\s+(?:{_QUOTED}|([^\s,;]+))"
    rf"|{_QUOTED}\s+(?:to|with|into|by|->|\u2192)\s+(?:{_QUOTED}|([^\s,;]+))"
    rf"|\b(?:{'|'.join(sorted(_TAKING))})\s+(?:[\w-]+\s+){{0,3}}?{_QUOTED}(?!\s+(?:to|with|into|by)\b)",
    re.IGNORECASE,
)


# A verb that puts text in: a quoted text after it ("added 'x' to todo.txt") went in, not out.
_PUTTING = re.compile(r"\b(?:add|append|insert|writ|wrote|put|sav|creat|cop(?:y|i)|mov)\w*", re.IGNORECASE)
_SWAPPING = re.compile(
    rf"\b(?:{'|'.join(sorted(_TAKING))}|chang\w*|updat\w*|modif\w*|edit\w*|set|turn\w*|replac\w*|renam\w*|"
    r"fix\w*|correct\w*)\b",
    re.IGNORECASE,
)


def taken_out(clause: str) -> list[tuple[str, str | None]]:
    """The texts `clause` says were taken out, each with the text it says took its place (None: removed)."""
    out = []
    for m in _SWAP.finditer(clause):
        before = clause[: m.start()]
        putting = [p.start() for p in _PUTTING.finditer(before)]
        swapping = [p.start() for p in _SWAPPING.finditer(before)]
        if putting and (not swapping or putting[-1] > swapping[-1]):
            continue
        g = m.groups()
        old = g[0] or g[1] or g[4] or g[7]
        new = g[2] or g[3] or g[5] or g[6] if not g[7] else None
        if old and old.strip():
            out.append((old.strip(), new.strip().rstrip(".") if new else None))
    return out


# A request's own ways to ask a quoted text out, with no replacement named: "fix 'recieve'", "remove the
# line '- done'", or a noun for a wrong text ("the typo 'recieve'", "a spelling mistake: 'recieve'").
# Verbs that bring a new text ("change", "rename", "replace") are left to the swap forms of `_SWAP`: the
# old text may stay inside the new one ("rename 'load' to 'load_all'"), and only the pair can tell.
_ASKING = re.compile(
    r"\b(?:(?:fix|correct)\s+|(?:remove|delete|drop)\s+(?:[\w-]+\s+){0,3}?|(?:typo|misspel\w*|mistake)[:\s]+)"
    rf"{_QUOTED}(?!\s+(?:to|with|into|by)\b)",
    re.IGNORECASE,
)


def asked_out(request: str) -> list[tuple[str, str | None]]:
    """The texts `request` asks to be taken out, each with the text it asks in its place (None: removed):
    the swaps `taken_out` reads, and a quoted text right after a verb or noun of fixing or removing."""
    out = taken_out(request)
    for m in _ASKING.finditer(request):
        if m.group(1).strip() and all(old != m.group(1).strip() for old, _ in out):
            out.append((m.group(1).strip(), None))
    return out


def still_there(
    swaps: Sequence[tuple[str, str | None]], records: Sequence[Recorded], fetch: Fetch | None
) -> tuple[str, str] | None:
    """The first text a clause says went out that is, in every file the task changed that had it before,
    there as often after the task's changes as before them, with that file's path; None when each went
    from somewhere, or nothing can be said (the text was in no file the task changed, the new text holds
    the old one, the bytes are not to be found)."""
    if fetch is None or not swaps:
        return None
    first, last = _spans(records)
    # Each file's bytes before the task's first change and after its last, fetched once for every text.
    files = [
        (path, fetch(sha) if sha else None, fetch(last[path]) if last[path] else b"") for path, sha in first.items()
    ]
    for old, new in swaps:
        if new is not None and old in new:
            continue
        text, put = old.encode(), (new or "").encode()
        had = [(path, before, after) for path, before, after in files if before is not None and text in before]
        # The new text come in where the old one stays is a swap done all the same: "set 'debug' to false"
        # leaves 'debug' in "debug = false".
        if had and all(
            after is not None and after.count(text) >= before.count(text)
            and not (put and after.count(put) > before.count(put))
            for _, before, after in had
        ):
            return old, had[0][0]
    return None


# A request to give a named field a value: "set retries to 11", "bump the project version to 0.8.0",
# "change the timeout in settings.yaml to 30s". The value is a bare token with a digit in it: a quoted
# text is a text put in ("change the heading to 'Release 2.0'"), a bare word ("set the level to debug")
# may be anything, and "from X to Y" is a swap, which `still_there` reads.
_SETTING = re.compile(
    r"\b(?:set|change|update|bump|increase|raise|lower|decrease|reduce|adjust)\s+"
    # The field's words stop at a clause's end; a dot inside a name ("settings.yaml") does not end one.
    r"((?:[^.,;:!?\n'\"`]|\.(?=\S)){1,60}?)\s+to\s+([\w+-]*\d[\w.+-]*)",
    re.IGNORECASE,
)
# Words that name no field: "the value of retries", "the setting for port", "the first row's count".
_NOT_FIELD = frozenset(
    "the a an of for in on at to my our its it this that these those value values setting settings field "
    "key option entry entries number file first last new old current item line row column".split()
)


def asked_set(request: str) -> list[tuple[tuple[str, ...], str]]:
    """The fields `request` asks to be given a value, each as the words that may name it with the value:
    "Set the retries in config.json to 11" is (("retries", "config", "json"), "11")."""
    out = []
    for m in _SETTING.finditer(request):
        words = tuple(w for w in _WORDS.findall(m.group(1).lower()) if w not in _NOT_FIELD)
        fields = tuple(w for w in words if w.isalpha() and len(w) >= 3)
        if fields and "from" not in words:
            out.append((fields, m.group(2).rstrip(".")))
    return out


def not_set(
    settings: Sequence[tuple[tuple[str, ...], str]], records: Sequence[Recorded], fetch: Fetch | None
) -> str | None:
    """Why the first field asked a value does not have it in the files the task changed, where a line of
    them held the field before: no line holds the field with the value after the task, or the line
    that does was put in beside the field's old one (its key on one more line than before). None when
    each is set, or nothing can be said (no file changed, no file had the field, bytes not found).

    Seen on the default model on unseen suites: "Set retries to 11" turned `"retries": 9` into
    `"11": 9`, and "Set timeout_seconds to 187" appended `timeout_seconds = 187` under
    `timeout_seconds = 100`; both answered that the setting was updated."""
    if fetch is None or not settings:
        return None
    first, last = _spans(records)
    files = [(path, _decoded(fetch, first[path]), _decoded(fetch, last[path])) for path in first]
    for words, value in settings:
        given = re.compile(rf"(?<![\d.]){re.escape(value)}(?!\w|\.\d)", re.IGNORECASE)
        had = [(path, field, before, after) for path, before, after in files
               if before is not None and (field := _setting(before, words)) is not None]
        holding = [(path, before, line) for path, _, before, after in had if after is not None
                   for line in after.splitlines() if _setting(line, words) and given.search(line)]
        if had and not holding:
            return f'no line of {", ".join(path for path, *_ in had)} has "{had[0][1]}" with "{value}"'
        for path, before, line in holding:
            key = _KEY.match(line)
            after = next(a for where, _, _, a in had if where == path)
            if key and _keyed(after, key.group(1)) > _keyed(before, key.group(1)) >= 1:
                return f'{path} has "{key.group(1)}" on one more line than before: its old value is still there'
    return None


# A request's own ways to dictate the text a file is to hold. A quoted text right after a verb that puts
# text in, with at most a few words between and none of them a preposition ("Add 'water the plants' to
# todo.txt", "Append a new item \"x\"", "Add the line '- x'"): in "write the output of 'python3 app.py'"
# the quote is what to run, not what to write. Or a quoted text, or the rest of the line after a colon,
# right after a word that says what the text is ("a file hello.txt that says: Hello!", "with the line:
# x", "containing exactly this sentence: x").
# "Make sure 'x' is gone" puts nothing in.
_PUT_VERB = r"\b(?:add|adding|append\w*|insert\w*|put|putting|writ\w*|sav\w*|creat\w*|mak\w*(?!\s+(?:sure|certain)\b))"
_PUTTING_VERB = re.compile(_PUT_VERB, re.IGNORECASE)
_DICTATING = (
    r"\b(?:says?|saying|reads?|reading|line|lines|sentence|text|words?|content|contents|containing|following)"
    r"(?:\s+(?:exactly|this|these|the|following|line|lines|sentence|text|words)){0,3}"
)
_PREPOSITION = r"(?:of|from|by|in|into|to|on|about|for|as|at|with|when|if)"
_PUT_QUOTE = re.compile(
    rf"(?:{_PUT_VERB}(?:\s+(?!{_PREPOSITION}\b)[\w./-]+){{0,3}}|{_DICTATING}\s*:?)\s*{_QUOTED}", re.IGNORECASE
)
# Verbs that take text out or swap it, in any form a request writes them.
_OUT_VERB = re.compile(
    r"\b(?:remov|delet|drop|strip|fix|correct|replac|renam|chang|swap|updat|edit|modif|turn|set\b)\w*", re.IGNORECASE
)
# Another quoted text in the same list: "listing 'Mila' and 'Joost'".
_AND_QUOTE = re.compile(rf"\s*(?:,\s*(?:and\s+)?|and\s+|or\s+){_QUOTED}", re.IGNORECASE)
_PUT_REST = re.compile(rf"{_PUT_VERB}\b[^:\n]{{0,80}}?{_DICTATING}\s*:[ \t]*([^\n]{{2,200}}?)\s*$", re.IGNORECASE)


def asked_in(request: str) -> list[str]:
    """The texts `request` dictates a file is to hold, in the request's order: "Add 'water the plants'
    to todo.txt" asks in "water the plants", "Create hello.txt that says: Hello from the team!" asks in
    "Hello from the team!"."""
    out: list[str] = []
    for m in _PUT_QUOTE.finditer(request):
        # Under a verb that swaps or takes text out ("fix the misspelt word 'seperate'", "remove the line
        # '- done'"), a quote is the text to go, whatever word names it.
        puts = [p.start() for p in _PUTTING_VERB.finditer(request, 0, m.end())]
        swaps = [p.start() for p in _OUT_VERB.finditer(request, 0, m.start())]
        if swaps and (not puts or swaps[-1] > puts[-1]):
            continue
        out.append(m.group(1))
        end = m.end()
        while (more := _AND_QUOTE.match(request, end)) is not None:
            out.append(more.group(1))
            end = more.end()
    rest = _PUT_REST.search(request)
    if rest is not None:
        text = rest.group(1).strip()
        quoted = re.fullmatch(_QUOTED, text)
        out.append(quoted.group(1) if quoted else text)
    return list(dict.fromkeys(t.strip() for t in out if t.strip()))


def _squeezed(text: str) -> str:
    return " ".join(text.split()).casefold()


def not_put(texts: Sequence[str], records: Sequence[Recorded], fetch: Fetch | None) -> str | None:
    """Why the first text the request dictates is not in the files the task changed: no file holds it
    after the task's last change (case and runs of spaces aside, and a stop at its end, which may be the
    request's own). None when every one is there, or nothing can be said (no file changed, bytes not
    found).

    Seen on the default model on unseen suites: a new file written with a line of its own making instead
    of the sentence the request gave it, and the answer that the file was created as asked."""
    if fetch is None or not texts:
        return None
    _, last = _spans(records)
    if not last:
        return None
    held = []
    for sha in last.values():
        text = _decoded(fetch, sha) if sha else ""
        if text is None:
            return None
        held.append(_squeezed(text))
    for text in texts:
        wanted = _squeezed(text)
        if not any(wanted in h or wanted.rstrip(".") in h for h in held):
            return f'no file the task changed ({", ".join(last)}) holds "{_clip(text, 60)}"'
    return None


# A setting's key at the start of its line: `port = 8080`, `port: 8080`, `"port": 8080`.
_KEY = re.compile(r"""\s*["']?([\w.-]+)["']?\s*[:=]""")


def _keyed(text: str, key: str) -> int:
    """How many lines of `text` set `key`."""
    return sum(1 for line in text.splitlines() if (m := _KEY.match(line)) and m.group(1) == key)


def _setting(text: str, words: Sequence[str]) -> str | None:
    """The first of `words` that a line of `text` sets, as a word of its key ("log" in "log_level = 1"),
    or None. Only a key names the field: a CSV file's row holds its values, not the column's name."""
    held = {w for line in text.splitlines() if (m := _KEY.match(line)) for w in _WORDS.findall(m.group(1).lower())}
    return next((w for w in words if w in held), None)


def _decoded(fetch: Fetch, sha256: str | None) -> str | None:
    data = fetch(sha256) if sha256 else None
    try:
        return data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        return None


def _spans(records: Sequence[Recorded]) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """Each file the task changed since the latest user message: its hash before the first change, and
    after the last."""
    first: dict[str, str | None] = {}
    last: dict[str, str | None] = {}
    for rec in since_message(records):
        e = rec.event
        if isinstance(e, FileChanged):
            first.setdefault(e.path, e.before_sha256)
            last[e.path] = e.after_sha256
    return first, last


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


# -- what a program printed -----------------------------------------------------------------------

# The output field where a program's tools (shell, python, a skill's script: they share
# runtime.tools.shell.ShellOutput) put what it printed; a masked observation keeps its tail.
_PRINTED = ("stdout", "stdout_tail")
# Printed output a sentence can carry whole; a longer one is data the answer draws from, not repeats.
PRINTED_CHARS = 400
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


def unquoted(answer: str, records: Sequence[Recorded]) -> str | None:
    """Why `answer` says nothing of what it stands on: the task's last successful call since the user's
    latest message ran a program that printed a short output holding numbers, and the answer holds none
    of them. Seen on the default model with "checksum 13004" in the result: "The script was executed
    successfully and returned the exit code 0. The script prints a checksum and a status message."
    None when it may stand."""
    last = None
    for rec in since_message(records):
        if isinstance(rec.event, ToolCallExecuted) and rec.event.status == "ok":
            last = rec.event
    if last is None:
        return None
    printed = next((last.observation[k] for k in _PRINTED if isinstance(last.observation.get(k), str)), "").strip()
    numbers = set(_NUMBER.findall(printed))
    if not numbers or len(printed) > PRINTED_CHARS or numbers & set(_NUMBER.findall(answer)):
        return None
    return f'the answer does not say what {last.tool} printed: "{_clip(printed)}"; {UNQUOTED}'


# The words every such refusal ends with: it is made once, and the answer after it stands.
UNQUOTED = "answer with what it printed"


# -- copying agentd's own words --------------------------------------------------------------------

_WORDS = re.compile(r"[a-z0-9]+")
# A run of this many words in a row, copied from agentd's instructions, is not a coincidence.
RUN = 6
# Or most of the answer made of such runs.
SHARE = 0.7


def runs(text: str, n: int) -> set[tuple[str, ...]]:
    """Every run of `n` words in a row of `text`, lowercased, its punctuation aside."""
    words = _WORDS.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def copies(answer: str, texts: Iterable[str], n: int = RUN) -> bool:
    """Whether `answer` opens with, or mostly consists of, runs of `n` words copied from `texts`."""
    return _copied(answer, texts, n, SHARE, opening=True)


def restates(answer: str, request: str) -> bool:
    """Whether `answer` is the request handed back: all but a word or two of it copied from the request
    in runs of RUN words. Seen on the default model as whole answers: "Copy the first item of my todo
    list (notes/todo.txt) into a new file next.txt.", and a rename's request word for word. An answer
    that names what the request names in words of its own ("I renamed parse_records to gather_records")
    is not one."""
    return _copied(answer, (request,), RUN, RESTATED, opening=False)


# The share of an answer's words copied from the request that makes it the request handed back.
RESTATED = 0.9


def quotes_back(answer: str, request: str) -> bool:
    """Whether `answer` is, whole, a text the request quotes: the line to add or the value to put in,
    handed back instead of an answer. Seen on the default model on unseen suites, as the whole answer of
    a task that changed nothing: "renew the parking permit" for "Add 'renew the parking permit' to my
    todo list in notes/todo.txt."; and the line a new file was to hold, for a file never written."""
    said = _WORDS.findall(answer.lower())
    return bool(said) and any(_WORDS.findall(m.group(1).lower()) == said for m in re.finditer(_QUOTED, request))


def _copied(answer: str, texts: Iterable[str], n: int, share: float, *, opening: bool) -> bool:
    words = _WORDS.findall(answer.lower())
    if len(words) < n:
        return False
    known: set[tuple[str, ...]] = set()
    for text in texts:
        known |= runs(text, n)
    if opening and tuple(words[:n]) in known:
        return True
    covered = [False] * len(words)
    for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) in known:
            covered[i : i + n] = [True] * n
    return sum(covered) >= share * len(words)


# How a JSON object opens: a brace, then the quote of its first key. No sentence opens so.
_OBJECT_OPENING = re.compile(r'\{\s*"')


def is_data(answer: str) -> bool:
    """Whether `answer` is a JSON object or list rather than a sentence: a result handed back as it came,
    or an object cut short. Seen on the default model as a whole answer on the last try, with nothing
    changed: `{"thought": \\`, the opening of the decision it was asked for, cut where the answer ended."""
    text = answer.strip()
    if not text.startswith(("{", "[")):
        return False
    try:
        return isinstance(json.loads(text), (dict, list))
    except ValueError:
        return bool(_OBJECT_OPENING.match(text))

"""Rules over what a step may choose, each a small function of tool contracts, the request and the
task's recorded state.

A rule reads what a tool promises (its effects, what its path names, what it needs, what it reports)
and what was asked, never a tool's or a case's name, so that it holds for a plugin's tools as for the
built-in ones. `choices.choices_for` applies `RULES` in order; the profile's own lists (tools offered
on request, answered after, called first) are the only names a rule reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from runtime.agent import proposal, relevance
from runtime.agent.view import TaskView
from runtime.tools import edits
from runtime.tools.contract import Effect, ToolContract
from store.events import FileChanged, ToolCallExecuted

if TYPE_CHECKING:
    from runtime.agent.choices import Choices, Situation

# Verbs that ask for a change. Nouns that share a stem are not here ("notes", "settings", "logs",
# "records" are what questions are about); a request that asks a change in other words is still
# offered the changes unless it is a question.
CHANGE_VERBS = (
    "add append prepend insert put create make write save copy move rename change set bump update edit fix "
    "correct replace remove delete clear drop turn switch enable disable increase decrease raise lower sort "
    "format convert generate fill translate merge split rewrite refactor reset restore undo apply upgrade "
    "downgrade modify adjust swap uncomment comment patch amend empty erase truncate strip tidy clean reorder "
    "indent capitalise capitalize lowercase uppercase store"
).split()
_IRREGULAR = ("made", "wrote", "written", "put", "set", "split")


def _forms(verb: str) -> set[str]:
    """A verb as a request may write it: add, adds, added, adding; make, making; copy, copied; set, setting."""
    forms = {verb, verb + "s", verb + "es", verb + "ed", verb + "ing"}
    if verb.endswith("e"):
        forms |= {verb + "d", verb[:-1] + "ing"}
    if verb.endswith("y"):
        forms |= {verb[:-1] + "ies", verb[:-1] + "ied"}
    if re.fullmatch(r"[^aeiou]*[aeiou][^aeiouwy]", verb):  # set, drop, strip: the last letter doubled
        forms |= {verb + verb[-1] + "ed", verb + verb[-1] + "ing"}
    return forms


_CHANGE = re.compile(
    r"\b(?:" + "|".join(sorted({f for v in CHANGE_VERBS for f in _forms(v)} | set(_IRREGULAR), key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)


# A request for information in the imperative: "Read notes.md and tell me when the launch is."
_ASKING = re.compile(r"\?|\b(?:tell|show|give)\s+me\b|\b(?:explain|describe)\b", re.IGNORECASE)


def asks_a_change(request: str) -> bool:
    """Whether a request may want a file changed: anything but a request for information (a question,
    or "tell me", "show me", "explain"), and a request for information whose words ask for a change
    too ("Can you add ...?")."""
    return _ASKING.search(request) is None or _CHANGE.search(request) is not None


def question_changes_nothing(contract: ToolContract, request: str) -> bool:
    """A tool that writes the workspace's files is not a choice for a question that asks no change.

    Asked "When is the launch due, according to notes/2026-01-23.md?" in a task allowed to write, the
    default model rewrote the note it had just read (its heading line lost), then appended copies of
    it: an answer needs no write, and a write nobody asked for is how a user's lines are lost. A write
    elsewhere (a tenant's account, scope "tenant") is left to its profile's own rules: a support
    question may rightly end in a key rotation its runbook prescribes. True: leave the tool out of
    this step's choices."""
    return contract.scope == "workspace" and Effect.WRITE in contract.effects and not asks_a_change(request)


def only_reads(contract: ToolContract) -> bool:
    return {e.value for e in contract.effects} <= {"read"}


def path_kind(contract: ToolContract) -> str | None:
    """What a tool's `path` names: "read file" or "read folder" for a tool that only reads one that
    exists (reading again what the task holds unchanged is not offered), "file" for one that changes
    a file that exists, "new file" for one that writes a file that may not exist yet."""
    if contract.path_kind is not None:
        return f"read {contract.path_kind}" if only_reads(contract) else contract.path_kind
    if not only_reads(contract) and "path" in contract.input_model.model_fields:
        return "new file"
    return None


def commands_run(view: TaskView) -> set[str]:
    """The commands of the task's calls that have a result, whatever it was."""
    calls = view.calls
    return {c.arguments.get("command") for i, c in calls.proposed.items() if i in calls.finished} - {None}


def asked_for(tool: str, words: Sequence[str], request: str, view: TaskView | None) -> bool:
    """Whether a user's message (`request`, its own words) asks for what `tool` does, or a skill the
    user invoked names the tool. Documents, tool results and pasted text never count."""
    said = request.lower()
    if any(re.search(rf"\b{re.escape(w.lower())}", said) for w in words):
        return True
    active = view.active.values() if view else ()
    return any(s.by == "user" and re.search(rf"\b{re.escape(tool)}\b", s.body) for s in active)


NAMES_LEFT = " still uses a name your edit replaced"


@dataclass(frozen=True)
class NamesLeft:
    """A file the task edited that still uses names the edit took out, and the lines that do."""

    path: str
    names: tuple[str, ...]
    lines: str


def names_left(view: TaskView) -> NamesLeft | None:
    """The file a task's edit left using a name it took out (a result's `old_names_left`), unless a
    later call changed the file. An answer then is refused once, and the retry may change only those
    names: measured on the quality model, asked to rename `greet` and update its call, it renamed the
    definition, was shown the call left over, and answered that both were done; told so, it made the
    same edit again."""
    left: dict[str, tuple[str, NamesLeft | None]] = {}
    for rec in view.records:
        e = rec.event
        if isinstance(e, FileChanged):
            if e.path in left and left[e.path][0] != e.call_id:
                left[e.path] = (e.call_id, None)
            continue
        path = e.observation.get("path") if isinstance(e, ToolCallExecuted) and e.status == "ok" else None
        lines = e.observation.get("old_names_left") if isinstance(path, str) else None
        if lines and e.call_id in view.calls.proposed:
            arguments = view.calls.proposed[e.call_id].arguments
            gone = edits.replaced_names(str(arguments.get("old", "")), str(arguments.get("new", "")))
            names = tuple(sorted(n for n in gone if re.search(rf"\b{re.escape(n)}\b", lines)))
            left[path] = (e.call_id, NamesLeft(path, names, lines) if names else None)
    return next((found for _, found in left.values() if found), None)


# -- the choice rules, in the order they apply ---------------------------------------------------
#
# Each takes what a step may choose so far and the situation, and returns what it may choose now.


def _keep(choices: Choices, keep: Callable[[str], bool]) -> Choices:
    return replace(choices, tools=tuple(t for t in choices.tools if keep(t)))


def needs_are_met(choices: Choices, s: Situation) -> Choices:
    """A tool that needs something the task does not hold yet (an artifact from an earlier result, a
    skill it activated: the contract's `needs`) can do nothing, and is not offered."""
    held = {"artifact": bool(s.view.artifact_refs), "skill": bool(s.view.active)}
    return _keep(choices, lambda t: t not in s.contracts or s.contracts[t].needs is None
                 or held[s.contracts[t].needs])


def offered_on_request(choices: Choices, s: Situation) -> Choices:
    """A tool the profile offers on request is a choice only where the user's latest message asks
    for what it does (its own words; what was pasted, read or retrieved never counts)."""
    return _keep(choices, lambda t: t not in s.on_request or asked_for(t, s.on_request[t], s.request, s.view))


def questions_change_nothing(choices: Choices, s: Situation) -> Choices:
    """`question_changes_nothing`, over every tool offered."""
    return _keep(choices, lambda t: t not in s.contracts or not question_changes_nothing(s.contracts[t], s.request))


def not_the_refused_again(choices: Choices, s: Situation) -> Choices:
    """After a refusal, not the refused tool or skill. A call made before, asked for again, is a model
    stuck in one mode: after a read, the retry offers the changes and the answer (seen on the default
    model: the same read_file after the file's content was in the request, step after step); after a
    change, only the answer (offered the reads, the default model searched incidents after a rotation
    had run and asked for the rotation again at the next step), and no skill (offered them, it took in
    one unrelated skill after another instead, csv-summary and git-changes after a key rotation)."""
    if s.attempt <= 1:
        return choices
    refused = s.view.refused_proposal()
    if refused.get("action") == "activate_skill":
        return replace(choices, skills=())
    if refused.get("action") != "call_tool":
        return choices
    tool = refused.get("tool", "")
    repeated = proposal.call_key(tool, refused.get("arguments") or {}) in s.view.calls.done
    if not (repeated and tool in s.contracts):
        return _keep(choices, lambda t: t != tool)
    if only_reads(s.contracts[tool]):
        return _keep(choices, lambda t: t in s.contracts and not only_reads(s.contracts[t]))
    return replace(choices, tools=(), skills=())


def paths_worth_naming(choices: Choices, s: Situation) -> Choices:
    """Where the task knows every path there is, each path argument narrowed to what is worth naming
    at this step (`path_kind` says what a tool's path names):
    - a file is changed only once its content is in front of the model, read or written by the task
      (measured on the default model: an edit_file before any read guessed the old text, "debug_mode =
      true" for "debug = true"; with every file offered, "Create a file hello.txt" appended the request
      to docs/changelog.md);
    - where the request points at files of its own, nothing changes before one of them was read (the
      default model otherwise wrote next.txt, or appended to todo.txt, before it had read the todo list
      the request was about); a request that names none points at the files whose lines matched its
      words, where there are such, until one of them was read (measured on the default model with the
      matches shown and every file readable: asked which file says where the backups go, it read seven
      other files and answered with one of them; asked to bump the version, it edited data/team.json);
    - new files the request names are written before any other file is changed, under those names
      (offered both, the default model appended the rows it was to put in customers.txt to
      data/orders.csv; with the path free, "Create a file hello.txt" wrote data/hello.txt); otherwise a
      new file's name is free, and writing over a file not seen is refused by the judge;
    - reading again what the task holds unchanged only repeats a result it has: a small model
      otherwise rereads the file it should be answering from or changing, step after step."""
    known = s.view.transcript.paths
    if not known.complete:
        return choices
    # A file whose content this request no longer shows may be read again.
    unread = s.shown.unread if s.shown else frozenset()
    held = known.read - unread
    changed = set(s.view.transcript.changed_paths)
    seen = (held | changed) & known.files
    # The lines matched to the goal point at files while the goal is the request and until one of
    # those files was read: a match is by words, and the answer may be in a file no line matched.
    matched = set(s.view.transcript.matched) if s.view.transcript.turns == 1 else set()
    pointed = relevance.focus(s.request, known.files, () if matched & (known.read | changed) else matched)
    looked = pointed == known.files or bool(pointed & (known.read | changed))
    new = relevance.new_paths(s.request, known.files)
    tools = list(choices.tools)
    paths, unseen = dict(choices.paths), dict(choices.unseen)
    for name in choices.tools:
        kind = path_kind(s.contracts[name]) if name in s.contracts else None
        if kind in ("file", "new file") and not looked:
            tools.remove(name)
            continue
        if kind == "new file" and not new:
            unseen[name] = tuple(sorted(known.files - seen))
            continue
        if kind is None:
            continue
        fresh = {
            "read file": pointed - held,
            "read folder": known.folders - known.listed,
            "file": set() if new else seen,
            "folder": known.folders,
            "new file": new,
        }[kind]
        if fresh:
            paths[name] = tuple(sorted(fresh))
        else:
            tools.remove(name)
    return replace(choices, tools=tuple(tools), paths=paths, unseen=unseen)


def commands_as_given(choices: Choices, s: Situation) -> Choices:
    """A command the request gives to run is what runs first, as written: measured on the default
    model, "Run `python3 src/app.py` and tell me what it prints" ran echo 'Hello, world!'."""
    given = relevance.commands(s.request)
    if not given or set(given) & commands_run(s.view):
        return choices
    commands = {t: given for t in choices.tools
                if t in s.contracts and "command" in s.contracts[t].input_model.model_fields}
    return replace(choices, commands=commands)


def names_left_are_changed(choices: Choices, s: Situation) -> Choices:
    """An answer refused for the names an edit left (`names_left`): the retry changes those names in
    that file with a tool that says which names it leaves (its output has `old_names_left`), or
    answers (the request may have wanted them kept)."""
    left = names_left(s.view) if s.attempt > 1 and NAMES_LEFT in s.view.last_rejection else None
    editors = [t for t in choices.tools
               if t in s.contracts and "old_names_left" in s.contracts[t].output_model.model_fields]
    if left is None or not editors:
        return choices
    tool = editors[0]
    return replace(choices, tools=(tool,), paths={tool: (left.path,)}, values={tool: {"old": left.names}})


def answer_after_results(choices: Choices, s: Situation) -> Choices:
    """An answer waits for the results the profile says it must rest on, unless nothing is left that
    could give them."""
    missing = [t for t in s.answer_after if t in choices.tools and t not in s.view.calls.ran]
    if not missing:
        return choices
    return replace(choices, answer=False, unanswerable=f"call {missing[0]} first: the answer must rest on its result")


def calls_first(choices: Choices, s: Situation) -> Choices:
    """The calls a profile makes first come before anything else: no other tool, no answer, no
    escalation (the task cannot yet know what it would escalate)."""
    pending = [t for t in s.call_first if t in choices.tools and t not in s.view.calls.ran]
    if not pending:
        return choices
    why = f"call {pending[0]} first: everything else rests on its result"
    return replace(choices, tools=tuple(pending), answer=False, unanswerable=why, escalation=False)


RULES: tuple[Callable[[Choices, Situation], Choices], ...] = (
    needs_are_met,
    offered_on_request,
    questions_change_nothing,
    not_the_refused_again,
    paths_worth_naming,
    commands_as_given,
    names_left_are_changed,
    answer_after_results,
    calls_first,
)

"""What one attempt of a decision may propose, and the judge of its reply: the grammar is built from the
choices and the judge checks a reply against them and the recorded state."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from runtime.agent import claims, context, goal, policy as policy_, proposal, relevance, removal, rules
from runtime.agent.view import TaskView
from runtime.skills import activation
from runtime.tools import ToolContract, edits
from store.events import ToolCallExecuted


def _only_reads(contract: ToolContract) -> bool:
    return {e.value for e in contract.effects} <= {"read"}


def _path_kind(contract: ToolContract) -> str | None:
    """What a tool's `path` names: "read file" or "read folder" for a tool that only reads one that
    exists (reading again what the task holds unchanged is not offered), "file" for one that changes
    a file that exists, "new file" for one that writes a file that may not exist yet."""
    if contract.path_kind is not None:
        return f"read {contract.path_kind}" if _only_reads(contract) else contract.path_kind
    if not _only_reads(contract) and "path" in contract.input_model.model_fields:
        return "new file"
    return None


@dataclass(frozen=True)
class Choices:
    """What one attempt of one decision may propose: the grammar is built from it and the judge checks it."""

    tools: tuple[str, ...]
    skills: tuple[str, ...]
    sources: tuple[str, ...]
    escalation: bool = True
    # Per tool whose path is narrowed: the paths it may name at this step.
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Whether an answer may be given yet (the profile's `answer_after` tools have a result); why not, if not.
    answer: bool = True
    unanswerable: str = ""
    # Per tool that writes a path of its own choosing: the files there are whose content the task
    # has not seen, which it may not write over.
    unseen: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Per tool that runs a command: the commands it may run at this step, where they are narrowed.
    commands: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Per tool, any other argument narrowed at this step, with the values it may take.
    values: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    # The decision's last try: a refusal now fails the task, so only what code must refuse is refused.
    last: bool = False
    # Which try of the decision this is, and the instruction texts of its request (agentd's and the
    # tools' own words, which an answer may not copy).
    attempt: int = 1
    said: tuple[str, ...] = ()
    # Whether the task may change anything: only then is an answer's claim of a change checked.
    changes_allowed: bool = False
    # The contracts of the tools that may be called, for rules that read what a call would do.
    contracts: Mapping[str, ToolContract] = field(default_factory=dict)

    def narrowed(self, tool: str) -> dict[str, tuple[str, ...]]:
        """The arguments of `tool` whose values are narrowed at this step, with those values."""
        out = {"path": self.paths[tool]} if tool in self.paths else {}
        out = {**out, "command": self.commands[tool]} if tool in self.commands else out
        return {**out, **self.values.get(tool, {})}


def choices_for(
    offered: Sequence[str],
    view: TaskView,
    attempt: int,
    kind: str,
    *,
    escalation: bool = True,
    contracts: Mapping[str, ToolContract] | None = None,
    shown: policy_.Shown | None = None,
    answer_after: Sequence[str] = (),
    call_first: Sequence[str] = (),
    on_request: Mapping[str, Sequence[str]] | None = None,
) -> Choices:
    """Only what can be used now: skill files once a skill is active, artifacts once there are some,
    skills not yet taken in, paths the task may still usefully name; after a refusal, not the refused
    tool or skill; on the last step or the last try, only an answer (or an escalation, where the
    profile has one)."""
    contracts = contracts or {}
    # What the context policy left out of this request cannot be cited from it (an elided result keeps
    # its label and stays citable: the model read it, and the pointer says where it is).
    hidden = shown.dropped if shown else frozenset()
    sources = tuple(dict.fromkeys(c for c in view.transcript.citable if c not in hidden))
    if kind == "final_step" or attempt >= context.LAST_ATTEMPT:
        return Choices((), (), sources, escalation, last=attempt >= context.LAST_ATTEMPT)
    active = view.active
    request = goal.own_words(view.transcript.request)
    tools = [
        name
        for name in offered
        if not (name in activation.SKILL_TOOLS and not active)
        and not (name == "read_artifact" and not view.artifact_refs)
        and (name not in (on_request or {}) or asked_for(name, on_request[name], request, view))
        and not (name in contracts and rules.question_changes_nothing(contracts[name], request))
    ]
    pinned = view.pinned
    skills = [e.name for e in pinned.entries if e.name not in active] if pinned else []
    if attempt > 1:
        refused = view.refused_proposal()
        if refused.get("action") == "call_tool":
            tool = refused.get("tool", "")
            repeated = proposal.call_key(tool, refused.get("arguments") or {}) in view.calls.done
            if repeated and tool in contracts:
                # A call made before, asked for again, is a model stuck in one mode. After a read, the
                # retry offers the changes and the answer (seen on the default model: the same read_file
                # after the file's content was in the request, step after step). After a change, only
                # the answer: offered the reads, the default model searched incidents after a rotation
                # had run and asked for the rotation again at the next step.
                reads = _only_reads(contracts[tool])
                tools = [t for t in tools if t in contracts and not _only_reads(contracts[t])] if reads else []
                if not reads:
                    # Offered the skills, the default model took in one unrelated skill after another
                    # instead (csv-summary and git-changes after a key rotation), then answered wrongly.
                    skills = []
            else:
                tools = [t for t in tools if t != tool]
        elif refused.get("action") == "activate_skill":
            skills = []
    paths: dict[str, tuple[str, ...]] = {}
    unseen: dict[str, tuple[str, ...]] = {}
    known = view.transcript.paths
    # A file whose content this request no longer shows may be read again.
    unread = shown.unread if shown else frozenset()
    if known.complete:
        held = known.read - unread
        changed = set(view.transcript.changed_paths)
        # A file is changed only once its content is in front of the model: read, or written by the
        # task. Measured on the default model: an edit_file before any read guessed the old text
        # ("debug_mode = true" for "debug = true"), and with every file offered, "Create a file
        # hello.txt" appended the request to docs/changelog.md.
        seen = (held | changed) & known.files
        pointed = relevance.focus(request, known.files)
        # Where the request points at files of its own, nothing changes before one of them was read:
        # the default model otherwise wrote next.txt, or appended to todo.txt, before it had read the
        # todo list the request was about.
        looked = pointed == known.files or bool(pointed & (known.read | changed))
        # New files the request names are written before any other file is changed: offered both, the
        # default model appended the rows it was to put in customers.txt to data/orders.csv.
        new = relevance.new_paths(request, known.files)
        for name in list(tools):
            kind = _path_kind(contracts[name]) if name in contracts else None
            if kind in ("file", "new file") and not looked:
                tools.remove(name)
                continue
            if kind == "new file" and not new:
                # A new file's name is free, unless the request names the new files it wants; writing
                # over a file not seen is refused by the judge.
                unseen[name] = tuple(sorted(known.files - seen))
                continue
            if kind is None:
                continue
            # Reading again what the task holds unchanged only repeats a result it has: a small model
            # otherwise rereads the file it should be answering from or changing, step after step.
            fresh = {
                "read file": pointed - held,
                "read folder": known.folders - known.listed,
                "file": set() if new else seen,
                "folder": known.folders,
                # Measured on the default model with the path free, "Create a file hello.txt" wrote
                # data/hello.txt.
                "new file": new,
            }[kind]
            if fresh:
                paths[name] = tuple(sorted(fresh))
            else:
                tools.remove(name)
    # A command the request gives to run is what runs first, as written: measured on the default model,
    # "Run `python3 src/app.py` and tell me what it prints" ran echo 'Hello, world!'.
    given = relevance.commands(request)
    commands: dict[str, tuple[str, ...]] = {}
    if given and not set(given) & _commands_run(view):
        commands = {t: given for t in tools if t in contracts and "command" in contracts[t].input_model.model_fields}
    values: dict[str, dict[str, tuple[str, ...]]] = {}
    left = names_left(view) if attempt > 1 and _NAMES_LEFT in view.last_rejection else None
    if left is not None and "edit_file" in tools:
        # An answer refused for the names an edit left: the retry changes those names in that file, or
        # answers (the request may have wanted them kept).
        tools = ["edit_file"]
        paths = {"edit_file": (left.path,)}
        values = {"edit_file": {"old": left.names}}
    # The calls a profile makes first come before anything else: no other tool, no answer, no escalation
    # (the task cannot yet know what it would escalate).
    pending = [t for t in call_first if t in tools and t not in view.calls.ran]
    if pending:
        why = f"call {pending[0]} first: everything else rests on its result"
        return Choices(tuple(pending), tuple(skills), sources, False, paths, answer=False, unanswerable=why,
                       unseen=unseen, commands=commands, values=values)
    # An answer waits for the results it must rest on, unless nothing is left that could give them.
    missing = [t for t in answer_after if t in tools and t not in view.calls.ran]
    why = f"call {missing[0]} first: the answer must rest on its result" if missing else ""
    return Choices(tuple(tools), tuple(skills), sources, escalation, paths, answer=not missing, unanswerable=why,
                   unseen=unseen, commands=commands, values=values)


def _commands_run(view: TaskView) -> set[str]:
    """The commands of the task's calls that have a result, whatever it was."""
    calls = view.calls
    return {c.arguments.get("command") for i, c in calls.proposed.items() if i in calls.finished} - {None}


def limit_reached(completion_tokens: int, max_output_tokens: int) -> int | None:
    """The limit a reply filled, if it filled it: from the recorded count, so a re-run judges alike."""
    return max_output_tokens if completion_tokens >= max_output_tokens else None


def asked_for(tool: str, words: Sequence[str], request: str, view: TaskView | None) -> bool:
    """Whether a user's message (`request`, its own words) asks for what `tool` does, or a skill the
    user invoked names the tool. Documents, tool results and pasted text never count."""
    said = request.lower()
    if any(re.search(rf"\b{re.escape(w.lower())}", said) for w in words):
        return True
    active = view.active.values() if view else ()
    return any(s.by == "user" and re.search(rf"\b{re.escape(tool)}\b", s.body) for s in active)


def judge(text: str, choices: Choices, view: TaskView, cut_at: int | None = None) -> proposal.Action:
    """Step 7's first half: the reply as an action code will carry out, or Rejected with the reason.
    `cut_at`: the token limit the reply filled, if it did."""
    action = proposal.validate(
        proposal.parse(text, cut_at=cut_at),
        allowed_tools=set(choices.tools),
        skills=set(choices.skills),
        active_skills=set(view.active),
        sources=set(choices.sources),
        done_calls=view.calls.done,
        escalation=choices.escalation,
        paths=choices.paths,
        unanswerable=choices.unanswerable,
        unseen=choices.unseen,
        commands=choices.commands,
        values=choices.values,
    )
    if isinstance(action, proposal.CallTool) and action.tool in choices.contracts:
        adders = [n for n, c in choices.contracts.items() if c.changes == "path" and c.removes is None]
        why = removal.refusal(
            goal.own_words(view.transcript.request), choices.contracts[action.tool], action.arguments,
            view.records, adders,
        )
        if why is not None:
            raise proposal.Rejected(why)
    answer = action.answer if isinstance(action, proposal.FinalAnswer) else None
    if answer is not None and choices.changes_allowed:
        # A change claimed that the log does not hold is the worst answer there is: refused once, and if
        # claimed again (or on the last try) the task fails with the reason rather than complete.
        why = claims.unbacked(answer, view.records)
        if why is not None:
            if choices.last or (choices.attempt > 1 and _UNBACKED in view.last_rejection):
                raise proposal.Unbacked(why)
            raise proposal.Rejected(f"{why}; answer saying what was done and what was not")
    # A poor answer is still an answer: on the last try it stands, rather than fail a task whose work is
    # done (measured: refused on every try, it failed append_todo, fix_readme_typo and change_port after
    # their files were right).
    if answer is not None and not choices.last and (
        context.echoes_instructions(answer, view.last_rejection) or claims.copies(answer, choices.said)
    ):
        raise proposal.Rejected(
            "the answer repeats what you were told instead of answering; answer the request from the results, "
            "in a sentence of your own"
        )
    left = names_left(view)
    if answer is not None and not choices.last and left is not None and _NAMES_LEFT not in view.last_rejection:
        shown = "; ".join(left.lines.splitlines())
        raise proposal.Rejected(f"{left.path}{_NAMES_LEFT}: {shown}; change those too, or answer saying why they stay")
    return action


_NAMES_LEFT = " still uses a name your edit replaced"
_UNBACKED = "nothing was changed"


@dataclass(frozen=True)
class NamesLeft:
    """A file the task edited that still uses names the edit took out, and the lines that do."""

    path: str
    names: tuple[str, ...]
    lines: str


def names_left(view: TaskView) -> NamesLeft | None:
    """The file a task's edit left using a name it took out (edit_file's `old_names_left`), unless a
    later change to the file came after. An answer then is refused once, and the retry may change
    only those names: measured on the quality model, asked to rename `greet` and update its call, it
    renamed the definition, was shown the call left over, and answered that both were done; told so,
    it made the same edit again."""
    left: dict[str, NamesLeft | None] = {}
    for rec in view.records:
        e = rec.event
        path = e.observation.get("path") if isinstance(e, ToolCallExecuted) and e.status == "ok" else None
        if not isinstance(path, str):
            continue
        lines = e.observation.get("old_names_left")
        if e.tool == "edit_file" and lines and e.call_id in view.calls.proposed:
            arguments = view.calls.proposed[e.call_id].arguments
            gone = edits.replaced_names(str(arguments.get("old", "")), str(arguments.get("new", "")))
            names = tuple(sorted(n for n in gone if re.search(rf"\b{re.escape(n)}\b", lines)))
            left[path] = NamesLeft(path, names, lines) if names else None
        elif e.tool in ("edit_file", "write_file", "append_file"):
            left[path] = None
    return next((found for found in left.values() if found), None)

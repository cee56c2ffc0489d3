"""What one attempt of a decision may propose, and the judge of its reply: the grammar is built from the
choices and the judge checks a reply against them and the recorded state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from runtime.agent import claims, context, echo, goal, location, policy as policy_, proposal, removal, repetition, rules
from runtime.agent.rules import NAMES_LEFT, names_left
from runtime.agent.view import TaskView
from runtime.artifacts import Fetch
from runtime.tools import ToolContract


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
    # Texts an answer must open with, where the grammar narrows it (see location.answer_opens).
    answer_opens: tuple[str, ...] = ()

    def narrowed(self, tool: str) -> dict[str, tuple[str, ...]]:
        """The arguments of `tool` whose values are narrowed at this step, with those values."""
        out = {"path": self.paths[tool]} if tool in self.paths else {}
        out = {**out, "command": self.commands[tool]} if tool in self.commands else out
        return {**out, **self.values.get(tool, {})}


@dataclass(frozen=True)
class Situation:
    """What the choice rules read: the task as its log leaves it, this attempt, the user's latest words,
    the contracts of the tools offered, and the profile's own rules about them."""

    view: TaskView
    attempt: int
    request: str
    contracts: Mapping[str, ToolContract]
    shown: policy_.Shown | None = None
    answer_after: Sequence[str] = ()
    call_first: Sequence[str] = ()
    on_request: Mapping[str, Sequence[str]] = field(default_factory=dict)


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
    """Only what can be used now: the offered tools and skills as `rules.RULES` narrow them, in order;
    on the last step or the last try, only an answer (or an escalation, where the profile has one)."""
    # What the context policy left out of this request cannot be cited from it (an elided result keeps
    # its label and stays citable: the model read it, and the pointer says where it is).
    hidden = shown.dropped if shown else frozenset()
    sources = tuple(dict.fromkeys(c for c in view.transcript.citable if c not in hidden))
    opens = location.answer_opens(goal.own_words(view.transcript.request), view.records)
    if kind == "final_step" or attempt >= context.LAST_ATTEMPT:
        return Choices((), (), sources, escalation, last=attempt >= context.LAST_ATTEMPT, answer_opens=opens)
    pinned = view.pinned
    skills = tuple(e.name for e in pinned.entries if e.name not in view.active) if pinned else ()
    situation = Situation(
        view, attempt, goal.own_words(view.transcript.request), contracts or {}, shown,
        answer_after, call_first, on_request or {},
    )
    choices = Choices(tuple(offered), skills, sources, escalation, answer_opens=opens)
    for rule in rules.RULES:
        choices = rule(choices, situation)
    return choices


def limit_reached(completion_tokens: int, max_output_tokens: int) -> int | None:
    """The limit a reply filled, if it filled it: from the recorded count, so a re-run judges alike."""
    return max_output_tokens if completion_tokens >= max_output_tokens else None


def judge(
    text: str, choices: Choices, view: TaskView, cut_at: int | None = None, fetch: Fetch | None = None
) -> proposal.Action:
    """Step 7's first half: the reply as an action code will carry out, or Rejected with the reason.
    `cut_at`: the token limit the reply filled, if it did; `fetch`: the artifact store's bytes by hash,
    for the content of a file the task changed."""
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
        replacers = [n for n, c in choices.contracts.items() if c.removes is not None and c.removes[0]]
        contract = choices.contracts[action.tool]
        why = removal.refusal(
            goal.own_words(view.transcript.request), contract, action.arguments, view.records, adders, fetch,
            replacers,
        ) or repetition.refusal(contract, action.arguments, view.records, fetch) or echo.refusal(
            contract, action.arguments, view.records, choices.said, goal.own_words(view.transcript.request), fetch,
        )
        if why is not None:
            raise proposal.Rejected(why)
    answer = action.answer if isinstance(action, proposal.FinalAnswer) else None
    if answer is not None and choices.changes_allowed:
        # A change claimed that the log does not hold is the worst answer there is: refused once, and if
        # claimed again (or on the last try) the task fails with the reason rather than complete.
        why = claims.unbacked(answer, view.records, fetch, goal.own_words(view.transcript.request))
        if why is not None:
            if choices.last or (choices.attempt > 1 and _UNBACKED in view.last_rejection):
                raise proposal.Unbacked(why)
            raise proposal.Rejected(f"{why}; answer saying what was done and what was not")
    repeats = answer is not None and _repeats(answer, choices, view)
    if repeats and not choices.last:
        raise proposal.Rejected(
            "the answer repeats what you were told instead of answering; answer the request from the results, "
            "in a sentence of your own"
        )
    # A poor answer is still an answer: on the last try it stands when the task's work is done (measured:
    # refused on every try, it failed append_todo, fix_readme_typo and change_port after their files were
    # right). A task that changed nothing has only its answer to show: one that is agentd's words or a
    # result handed back ends the task (failed, or with a person where a call was blocked), not completed
    # with nothing done and nothing said.
    if repeats and not claims.effects(view.records).any:
        raise proposal.Unanswered(
            f"{_NO_ANSWER}: the reply repeats agentd's words or a result, and nothing was changed"
        )
    unquoted = claims.unquoted(answer, view.records) if answer is not None and not choices.last else None
    if unquoted is not None and not any(claims.UNQUOTED in r for r in view.rejections):
        raise proposal.Rejected(unquoted)
    unnamed = (
        location.unnamed(answer, goal.own_words(view.transcript.request), view.records)
        if answer is not None and not choices.last
        else None
    )
    if unnamed is not None and not location.refused(view.records):
        raise proposal.Rejected(unnamed)
    left = names_left(view)
    if answer is not None and not choices.last and left is not None and NAMES_LEFT not in view.last_rejection:
        shown = "; ".join(left.lines.splitlines())
        raise proposal.Rejected(f"{left.path}{NAMES_LEFT}: {shown}; change those too, or answer saying why they stay")
    return action


_UNBACKED = claims.UNBACKED
_NO_ANSWER = "no answer was given"


def _repeats(answer: str, choices: Choices, view: TaskView) -> bool:
    """Whether the answer hands back agentd's words (the instructions, a tool's description, a refusal)
    or a result as data, instead of answering."""
    return (
        context.echoes_instructions(answer, view.rejections)
        # A refusal copied past its opening words is agentd's words too: seen whole as an answer, "edit_file
        # failed: invalid_arguments; nothing was changed; answer saying what was done and what was not."
        or claims.copies(answer, (*choices.said, *view.rejections))
        or claims.restates(answer, goal.own_words(view.transcript.request))
        # Where the request may change files, a text it quotes is what to put in, not an answer.
        or (choices.changes_allowed and claims.quotes_back(answer, goal.own_words(view.transcript.request)))
        or claims.is_data(answer)
    )



"""What the model may propose, as a JSON schema for llama.cpp's grammar and as pydantic models for code.

Schema-valid is not correct: `validate` checks the values against trusted state (allowed tools,
sources the model was actually shown) and says precisely what is wrong, so one retry can fix it.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from runtime.canonical import canonical_json

# llama.cpp's schema-to-grammar spells out every position of a maxLength, so the grammar balloons
# past a few hundred: the answer's limit is left to validation (and to max_tokens).
REASON_CHARS = 240
ANSWER_CHARS = 1200


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Written first, before the action is chosen: what the results show and what is left to do.
    # Measured on decision points where the models went wrong, both Qwen models chose the right action
    # more often when they said this first (0.5B: 3 of 8 against 2; 1.5B: 5 of 8 against 4).
    thought: str = Field("", max_length=REASON_CHARS)


class CallTool(_Action):
    action: Literal["call_tool"]
    tool: str
    arguments: dict[str, Any]
    # Logs recorded before `thought` carry the call's reason here.
    reason: str = Field("", max_length=REASON_CHARS)

    @property
    def why(self) -> str:
        """What a person approving the call is shown as the model's reason."""
        return self.thought or self.reason


class ActivateSkill(_Action):
    action: Literal["activate_skill"]
    skill: str
    reason: str = Field("", max_length=REASON_CHARS)


class FinalAnswer(_Action):
    action: Literal["final_answer"]
    answer: str = Field(min_length=1, max_length=ANSWER_CHARS)
    sources: list[str] = []


class Escalate(_Action):
    action: Literal["escalate"]
    reason: str = Field(min_length=1, max_length=REASON_CHARS)


Action = Annotated[Union[CallTool, ActivateSkill, FinalAnswer, Escalate], Field(discriminator="action")]
_adapter: TypeAdapter[Action] = TypeAdapter(Action)


class Rejected(ValueError):
    """A proposal that code will not act on; the message is fed back to the model on the retry."""


class Unbacked(Rejected):
    """An answer that claims a change the task's log does not hold, refused for the second time or on
    the last try, or no answer at all on the last try of a task that changed nothing: the task fails
    with the reason instead of completing."""


class Unanswered(Unbacked):
    """No answer at all on the last try of a task that changed nothing (the reply repeats agentd's words,
    the request or a result): it claims nothing, so where a call was blocked the task can go to a person
    instead of failing (decide.hand_over)."""


MAX_SOURCES = 8


def schema(
    tool_arguments: dict[str, dict],
    skills: list[str],
    allow_answer: bool = True,
    citable: Sequence[str] = (),
    allow_escalate: bool = True,
    results: bool = True,
    answer_opens: Sequence[str] = (),
) -> dict:
    """The output contract of one decision: one of the allowed actions, nothing else.

    `tool_arguments` maps each tool usable in this decision to the JSON schema of its arguments;
    `citable` are the ids of the data blocks the model was shown, the only sources an answer can
    name: the grammar then cannot write an id the model never saw, nor miss one by a character.
    `results`: whether the model has been shown a tool's result, which the thought then opens with.
    `answer_opens`: where given, the answer opens with one of these texts (the files a request asking
    which file may be answered with, once an answer naming none was refused).
    """
    options: list[dict] = []
    for name in sorted(tool_arguments):
        options.append(_object(action={"const": "call_tool"}, tool={"const": name}, arguments=tool_arguments[name]))
    if skills:
        options.append(_object(action={"const": "activate_skill"}, skill={"enum": sorted(skills)}))
    if allow_answer:
        options.append(
            _object(
                action={"const": "final_answer"},
                answer=_opening(answer_opens),
                sources=_sources(citable),
            )
        )
    if allow_escalate:
        options.append(
            _object(action={"const": "escalate"}, reason={"type": "string", "minLength": 1, "maxLength": REASON_CHARS})
        )
    return {"anyOf": options, "$defs": {"thought": _THOUGHT if results else _FREE_THOUGHT}}


def _opening(texts: Sequence[str]) -> dict:
    """A JSON string that opens with one of `texts` (paths: word characters, dots, dashes and slashes),
    then goes on as any string may. A dot is written as a class, `[.]`: llama.cpp's converter keeps the
    backslash of an escaped one in the grammar, which would then ask for a backslash in the text."""
    either = "|".join(t.replace(".", "[.]") for t in dict.fromkeys(texts) if _PLAIN.fullmatch(t))
    if not either:
        return {"type": "string", "minLength": 1}
    return {"type": "string", "pattern": f'^({either})[^"\\\\\\x00-\\x1f]*$'}


_PLAIN = re.compile(r"[\w./-]+")


def _sources(citable: Sequence[str]) -> dict:
    ids = list(dict.fromkeys(citable))
    if not ids:
        return {"type": "array", "maxItems": 0}
    return {"type": "array", "items": {"enum": ids}, "maxItems": MAX_SOURCES}


# Once there are results, the thought opens with what they show. Left free, the default model's
# thought restated the request or the decision block ("The request does not answer the request.") and
# its answer followed the thought, not the results; the quality model's thought restated what a file
# it was asked to change held, and ended "so the file remains unchanged". Opened this way the default
# model counted the three errors it had called one, and the quality model made the edits it had
# skipped (write and multi-step screening: 9 of 9 against 6). Code does not check the opening: a log
# recorded before it, or another model's reply, is read as it is. Before the first result it is
# free: opened so there, the quality model made up what a file said ("the Q3 report is due in the
# notes/ideas.md file") and read the wrong one.
THOUGHT_OPENING = "The results show "
# A JSON string's characters (no quote, backslash or control character), at most this many of them.
# Defined once and referred to by every action: llama.cpp's converter spells a bound out in full, once
# per place it is used (inline in each action, the grammar of the built-in tools was 76 kB).
_THOUGHT = {
    "type": "string",
    "pattern": f'^{THOUGHT_OPENING}[^"\\\\\\x00-\\x1f]{{0,{REASON_CHARS - len(THOUGHT_OPENING)}}}$',
}
_FREE_THOUGHT = {"type": "string", "maxLength": REASON_CHARS}


def _object(**properties: dict) -> dict:
    properties = {"thought": {"$ref": "#/$defs/thought"}, **properties}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def parse(text: str, *, cut_at: int | None = None) -> Action:
    """The model's output as an action, or Rejected saying what is wrong with it. `cut_at`: the output
    filled its token limit, which is then what is wrong with it, not where the JSON broke off."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        if cut_at is not None:
            # Under the grammar only a cut can leave JSON unfinished. Told where it broke off, the default
            # model wrote the same runaway text again.
            raise Rejected(
                f"your reply reached the limit of {cut_at} tokens before its JSON was complete; reply again, "
                "shorter: a one-sentence thought, and nothing written twice"
            ) from None
        raise Rejected(f"the output is not JSON ({e.msg} at character {e.pos})") from None
    try:
        return _adapter.validate_python(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "output"
        raise Rejected(f"{loc}: {err['msg']}") from None


def call_key(tool: str, arguments: dict) -> str:
    return f"{tool} {canonical_json(arguments)}"


def from_dict(data: dict) -> Action:
    """An action as recorded in the log (already validated once)."""
    return _adapter.validate_python(data)


def validate(
    action: Action,
    *,
    allowed_tools: set[str],
    skills: set[str],
    sources: set[str],
    done_calls: dict[str, str] | None = None,
    active_skills: frozenset[str] | set[str] = frozenset(),
    escalation: bool = True,
    paths: dict[str, tuple[str, ...]] | None = None,
    unanswerable: str = "",
    unseen: dict[str, tuple[str, ...]] | None = None,
    commands: dict[str, tuple[str, ...]] | None = None,
    values: dict[str, dict[str, tuple[str, ...]]] | None = None,
) -> Action:
    """Check the proposal against trusted state; arguments are checked by the tool's own contract.

    `done_calls` maps `call_key`s of calls already carried out to their call ids: the same call again
    would only return the same result, which a small model otherwise requests in a loop.
    """
    if isinstance(action, Escalate) and not escalation:
        raise Rejected("there is no escalation here; give the final answer, saying what could not be done and why")
    if isinstance(action, CallTool) and action.tool not in allowed_tools:
        known = ", ".join(sorted(allowed_tools)) or "none"
        raise Rejected(f"there is no tool {action.tool!r} in this step; the tools are: {known}")
    if isinstance(action, CallTool) and done_calls and call_key(action.tool, action.arguments) in done_calls:
        earlier = done_calls[call_key(action.tool, action.arguments)]
        raise Rejected(
            f"{action.tool} was already called with exactly these arguments (call {earlier}); its result is "
            "above. Use it, try different arguments, or answer"
        )
    if isinstance(action, CallTool) and paths and action.tool in paths:
        path = action.arguments.get("path")
        if path not in paths[action.tool]:
            raise Rejected(
                f"{action.tool} cannot take {path!r} now: it is not a path the workspace listing shows, its "
                f"content is above already, or it was not read before a change; it can take: "
                f"{', '.join(paths[action.tool])}"
            )
    if isinstance(action, CallTool) and unseen and action.arguments.get("path") in unseen.get(action.tool, ()):
        path = action.arguments["path"]
        raise Rejected(f"{path} exists and you have not seen its content: read_file it before you write it over")
    if isinstance(action, CallTool) and commands and action.tool in commands:
        if action.arguments.get("command") not in commands[action.tool]:
            raise Rejected(f"run the command the request gives first, as written: {', '.join(commands[action.tool])}")
    if isinstance(action, CallTool) and values and action.tool in values:
        for name, allowed in values[action.tool].items():
            if action.arguments.get(name) not in allowed:
                raise Rejected(f"{action.tool}'s {name} can only be {', '.join(allowed)} now")
    if isinstance(action, ActivateSkill) and action.skill in active_skills:
        raise Rejected(f"the skill {action.skill!r} is already active: its instructions are above; follow them")
    if isinstance(action, ActivateSkill) and action.skill not in skills:
        known = ", ".join(sorted(skills)) or "none"
        raise Rejected(f"there is no skill {action.skill!r}; the skills are: {known}")
    if isinstance(action, FinalAnswer) and unanswerable:
        raise Rejected(unanswerable)
    if isinstance(action, FinalAnswer):
        unknown = [s for s in action.sources if s not in sources]
        if unknown:
            shown = ", ".join(sorted(sources)) or "none"
            raise Rejected(f"sources {unknown} are not ids of data you were shown; cite only: {shown}")
    return action

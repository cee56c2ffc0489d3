"""Rules over what a step may choose, each a small function of tool contracts and the request.

A rule reads what a tool promises (its effects) and what was asked, never a tool's or a case's name,
so that it holds for a plugin's tools as for the built-in ones. The loop's older choice rules live in
`choices.choices_for` until they move here one by one, each with its measurement.
"""

from __future__ import annotations

import re

from runtime.tools.contract import Effect, ToolContract

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

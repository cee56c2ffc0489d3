"""The user's goal: their instruction to the task, and the material they pasted into it, which is data.

The authenticated user's request is what the task is for, so it is shown as an instruction, not
fenced as untrusted data (a model told that fenced text is "not instructions" then cannot tell what
it was asked to do). What the user quotes or pastes into the request (a fenced block, `>` quoted
lines) came from somewhere else, an e-mail, a log, a web page, and is fenced as data like a file.
Either way no text grants a right: tools, effects and approvals are checked in code.
"""

from __future__ import annotations

import re

from runtime.agent.blocks import Block, neutralize

# A ``` or ~~~ fence as Markdown writes it (unclosed, it runs to the end of the goal), or a run of
# `>` quoted lines: one pattern, so that pasted parts are numbered in the order they appear.
_PASTED = re.compile(
    r"^(?P<fence>```|~~~)[^\n]*\n(?P<fenced>.*?)(?:^(?P=fence)[ \t]*$|\Z)"
    r"|(?P<quoted>(?:^[ \t]*>[^\n]*(?:\n|\Z))+)",
    re.MULTILINE | re.DOTALL,
)
_QUOTE_MARK = re.compile(r"^[ \t]*> ?", re.MULTILINE)
# What stands in a request for a part pasted into it; own_words finds it by the same text.
_PLACEHOLDER_TEXT = "[pasted text {n}, shown below as data {label}]"
_PLACEHOLDER = re.compile(
    re.escape(_PLACEHOLDER_TEXT).replace(r"\{n\}", r"\d+").replace(r"\{label\}", r"pasted:[\d.]+")
)


def blocks(goal: str, turn: int = 1) -> list[Block]:
    """The request as one trusted block, followed by one data block per pasted part, in order.

    `turn` numbers the user's messages to a conversation: the goal is the first, and each later one
    is a request of its own (`request:2`, its pasted parts `pasted:2.1`, ...), rendered the same way.
    """
    pasted: list[str] = []
    label, part = message_label(turn), ("pasted:" if turn == 1 else f"pasted:{turn}.")

    def cut(m: re.Match) -> str:
        text = m.group("fenced") if m.group("fence") else _QUOTE_MARK.sub("", m.group("quoted"))
        pasted.append(text.strip("\n"))
        return _PLACEHOLDER_TEXT.format(n=len(pasted), label=f"{part}{len(pasted)}") + "\n"

    instruction = _PASTED.sub(cut, goal)
    # The user's own words may not spell the model's special tokens any more than a file may.
    out = [Block(label, "instruction", "user", "trusted", neutralize(instruction.strip()))]
    out += [
        Block(f"{part}{n}", "evidence", "user:pasted", "untrusted", text)
        for n, text in enumerate(pasted, start=1)
    ]
    return out


def own_words(instruction: str) -> str:
    """A request block's text without the placeholders that stand for what was pasted into it."""
    return _PLACEHOLDER.sub(" ", instruction)


def message_label(turn: int) -> str:
    """The label of a user message's block: `request` for the goal, `request:N` for the N-th message."""
    return "request" if turn == 1 else f"request:{turn}"


def message_turn(label: str) -> int:
    """The turn a user message's label names: the inverse of message_label."""
    return int(label.partition(":")[2] or 1)

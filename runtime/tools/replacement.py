"""Where a call that names text to replace replaces it: the places of a contract's `removes` pair, read
the same way by the tool that runs the call and by the check that judges it before it runs.

Text that begins or ends with a letter or digit stands for a whole word there: seen on the default
model, `edit_file {"old": "8", "new": "19"}` for "The retries should be 19 instead of 8" turned
`"port": 9840` into `"port": 91940` as well as `"retries": 8` into 19. Only where the text stands
nowhere as a whole word (a typo inside a longer word, "recieve" in "recieved") is every place it
occurs replaced.
"""

from __future__ import annotations

import re


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def places(text: str, old: str) -> list[int]:
    """Where `old` starts in `text`, without overlaps: the places it stands as a whole word, or, where it
    stands nowhere so, every place it occurs."""
    found = [m.start() for m in re.finditer(re.escape(old), text)] if old else []
    whole = [
        i for i in found
        if not (_is_word(old[0]) and i > 0 and _is_word(text[i - 1]))
        and not (_is_word(old[-1]) and i + len(old) < len(text) and _is_word(text[i + len(old)]))
    ]
    return whole or found


def replace(text: str, old: str, new: str) -> tuple[str, int]:
    """`text` with `old` replaced by `new` at its places, and how many places there were."""
    at = places(text, old)
    out, last = [], 0
    for i in at:
        out += [text[last:i], new]
        last = i + len(old)
    return "".join(out) + text[last:], len(at)

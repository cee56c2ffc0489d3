"""Diffs of file changes: the unified diff a person reads, and the lines added and removed a model is shown."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runtime.tools.files import decode_text
from store.events import FileChanged

# A change shown to the model is cut here: enough for the lines an edit touched and a short file whole.
SHOWN_LINES = 40


@dataclass(frozen=True)
class FileDiff:
    """One file's change as text: its unified diff and its counts of lines added and removed."""

    path: str
    kind: str  # "created", "changed", "deleted"
    text: str
    added: int
    removed: int
    binary: bool = False


def _lines(data: bytes | None) -> list[str] | None:
    """The text's lines with their endings, [] for no file, None for bytes that are not text."""
    if data is None:
        return []
    text = decode_text(data)
    return None if text is None else text.splitlines(keepends=True)


def file_diff(path: str, before: bytes | None, after: bytes | None) -> FileDiff:
    """The unified diff of one file from `before` to `after` (None: the file did not exist)."""
    kind = "created" if before is None else "deleted" if after is None else "changed"
    old, new = _lines(before), _lines(after)
    if old is None or new is None:
        size = lambda data: "nothing" if data is None else f"{len(data)} bytes"  # noqa: E731
        return FileDiff(path, kind, f"Binary file {path} {kind}: {size(before)} -> {size(after)}\n", 0, 0, True)
    lines = list(difflib.unified_diff(
        old, new, fromfile="/dev/null" if before is None else f"a/{path}",
        tofile="/dev/null" if after is None else f"b/{path}", n=3,
    ))
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return FileDiff(path, kind, text, added, removed)


def of_change(change: FileChanged, load: Callable[[str], bytes]) -> FileDiff:
    """The diff of a recorded change, its two versions read by hash through `load`."""
    before = None if change.before_sha256 is None else load(change.before_sha256)
    after = None if change.after_sha256 is None else load(change.after_sha256)
    return file_diff(change.path, before, after)


def for_model(diffs: Sequence[FileDiff], max_lines: int = SHOWN_LINES) -> str:
    """What a call changed, as the model is shown it in the call's result: per file, the lines removed
    (`-`) and added (`+`) with a line of context either side, cut at `max_lines`.

    Seen on the default model: asked to add a line to todo.txt, it replaced "buy milk" with the new
    line and answered that the file was updated. The removed line, shown at the next decision, is what
    lets it see what it did.
    """
    out: list[str] = []
    for d in diffs:
        if d.binary:
            out.append(d.text.rstrip("\n"))
            continue
        head = {"created": "created", "deleted": "deleted", "changed": "changed"}[d.kind]
        out.append(f"{d.path} {head}: {d.added} line{'' if d.added == 1 else 's'} added, "
                   f"{d.removed} line{'' if d.removed == 1 else 's'} removed")
        out += [line for line in d.text.splitlines() if not line.startswith(("---", "+++"))]
    if len(out) > max_lines:
        out = out[:max_lines] + [f"... ({len(out) - max_lines} more lines; agentd task diff shows them all)"]
    return "\n".join(out)

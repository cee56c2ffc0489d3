"""The edit tools: change part of a text file in the workspace, by replacing text or adding lines at its end.

A whole-file write asks the model to copy every line it means to keep, and a small model drops or
mangles some (measured on the default model: a typo fix that rewrote README.md as "This is a test
file.", an item added to todo.txt as the only line left). These tools name only the change.
"""

from __future__ import annotations

import difflib
import hashlib
import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.tools import replacement
from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure
from runtime.tools.files import (
    MAX_READ_BYTES,
    MAX_WRITE_CHARS,
    PATH_ERRORS,
    Sha256,
    WorkspacePath,
    binary_failure,
    read_regular,
    write_atomically,
)
from runtime.tools.workspace import relative, resolve

# Lines of the file shown back after a change, so the model sees the result without reading again.
SHOWN_LINES = 12
# A file this short is shown whole after an edit. Shown only the changed line, the quality model
# took `debug = false` for the whole file and wrote it over config/app.toml, port and all.
WHOLE_FILE_LINES = 40

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Values, not names: `debug = true` made `debug = false` says nothing about other lines' `true`.
_LITERALS = frozenset({"true", "false", "none", "null", "nil", "yes", "no", "on", "off"})

_TEXT_ERRORS = {
    "not_found": "no file at that path; write_file creates one",
    "is_directory": "the path is a folder",
    "binary_file": "the file is not UTF-8 text",
    "file_too_large": f"the file is over {MAX_READ_BYTES} bytes",
    "write_failed": "the file system refused the write (full, read-only, permissions)",
}


class EditFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = WorkspacePath
    old: str = Field(
        min_length=1, max_length=MAX_WRITE_CHARS, description="the exact text to replace, as the file has it"
    )
    new: str = Field(max_length=MAX_WRITE_CHARS, description="the text to put in its place; empty to delete it")

    @model_validator(mode="after")
    def _changes_something(self) -> EditFileArgs:
        # Seen on the default model asked to fix "recieve": old "recieve", new "recieve". The tool
        # would report a replacement and the task would answer that the typo was fixed.
        if self.old == self.new:
            raise ValueError(
                "new is the same as old, so nothing would change: give the text as it should read after the change"
            )
        return self


class EditFileOutput(BaseModel):
    path: str
    replaced: int = Field(ge=1, description="places the text was replaced")
    size: int = Field(ge=0, description="bytes")
    sha256: str = Sha256
    changed_lines: list[str] = Field(description=f"the lines that hold the new text, at most {SHOWN_LINES}")
    file_after: str | None = Field(
        None, description=f"the whole file after the change, if it has at most {WHOLE_FILE_LINES} lines"
    )
    old_names_left: str | None = Field(
        None,
        description=(
            "lines that still use a name `old` had and `new` does not (a renamed function's calls),"
            f" at most {SHOWN_LINES}"
        ),
    )


class AppendFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = WorkspacePath
    text: str = Field(min_length=1, max_length=MAX_WRITE_CHARS, description="the lines to add at the end")


class AppendFileOutput(BaseModel):
    path: str
    size: int = Field(ge=0, description="bytes")
    sha256: str = Sha256
    lines: int = Field(ge=0)
    last_lines: list[str] = Field(description=f"the file's last lines after the change, at most {SHOWN_LINES}")


class EditFile(Tool[EditFileArgs, EditFileOutput]):
    contract = ToolContract(
        name="edit_file",
        description=(
            "Change a text file in the workspace: replace every place it has the text `old` with `new` (a "
            "word or number as a whole word, not inside a longer one). Use it to fix, rename or change a "
            "value; `old` must be copied exactly from the file. What `old` holds is gone unless `new` repeats "
            "it: to add lines, use append_file."
        ),
        input_model=EditFileArgs,
        output_model=EditFileOutput,
        effects=[Effect.WRITE],
        changes="path",
        # Twice is not once: a second run replaces again in what the first one wrote, or finds nothing.
        idempotent=False,
        removes=("old", "new"),
        scope="workspace",
        timeout_s=10,
        preconditions=("the file exists and contains `old`",),
        errors={
            **PATH_ERRORS, **_TEXT_ERRORS, "text_not_found": "the file does not contain `old`; see the closest lines"
        },
        summary_fields=("path", "replaced", "size"),
        path_kind="file",
    )

    def authorize(self, ctx: ToolContext, args: EditFileArgs) -> None:
        resolve(ctx, args.path)

    def run(self, ctx: ToolContext, args: EditFileArgs) -> EditFileOutput:
        real = resolve(ctx, args.path)
        name = relative(ctx, real)
        text = _read_text(real, name)
        changed, count = replacement.replace(text, args.old, args.new)
        if count == 0:
            raise ToolFailure(
                "text_not_found",
                f"{name} does not contain the text given as old",
                {"path": name, "closest_lines": _closest(text, args.old)},
            )
        data = changed.encode("utf-8")
        write_atomically(real, name, data)
        digest = hashlib.sha256(data).hexdigest()
        marker = args.new.strip() or None
        lines = changed.splitlines()
        shown = [line for line in lines if marker and marker.splitlines()[0] in line][:SHOWN_LINES]
        return EditFileOutput(
            path=name, replaced=count, size=len(data), sha256=digest, changed_lines=shown,
            file_after=changed if len(lines) <= WHOLE_FILE_LINES else None,
            old_names_left=_names_left(lines, args.old, args.new),
        )


class AppendFile(Tool[AppendFileArgs, AppendFileOutput]):
    contract = ToolContract(
        name="append_file",
        description=(
            "Add lines at the end of a text file in the workspace, keeping everything it has. Use it to add "
            "an item to a list, a line to a log or notes."
        ),
        input_model=AppendFileArgs,
        output_model=AppendFileOutput,
        effects=[Effect.WRITE],
        changes="path",
        # Twice adds the lines twice.
        idempotent=False,
        adds="text",
        scope="workspace",
        timeout_s=10,
        preconditions=("the file exists",),
        errors={**PATH_ERRORS, **_TEXT_ERRORS},
        summary_fields=("path", "size", "lines"),
        path_kind="file",
    )

    def authorize(self, ctx: ToolContext, args: AppendFileArgs) -> None:
        resolve(ctx, args.path)

    def run(self, ctx: ToolContext, args: AppendFileArgs) -> AppendFileOutput:
        real = resolve(ctx, args.path)
        name = relative(ctx, real)
        text = _read_text(real, name)
        # The new lines start on a line of their own and end with a newline, as a text file's lines do.
        if text and not text.endswith("\n"):
            text += "\n"
        text += args.text if args.text.endswith("\n") else args.text + "\n"
        data = text.encode("utf-8")
        write_atomically(real, name, data)
        digest = hashlib.sha256(data).hexdigest()
        lines = text.splitlines()
        return AppendFileOutput(
            path=name, size=len(data), sha256=digest, lines=len(lines), last_lines=lines[-SHOWN_LINES:]
        )


def _read_text(real, name: str) -> str:
    if real.is_dir():
        raise ToolFailure("is_directory", f"{name} is a folder, not a file", {"path": name})
    data = read_regular(real, name, MAX_READ_BYTES)
    digest = hashlib.sha256(data).hexdigest()
    if b"\x00" in data:
        raise binary_failure(name, data, digest)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise binary_failure(name, data, digest) from None


def replaced_names(old: str, new: str) -> set[str]:
    """The names (identifiers, not values such as `true`) that `old` has and `new` does not."""
    return {w for w in _WORD.findall(old) if len(w) > 2 and w.lower() not in _LITERALS} - set(_WORD.findall(new))


def _names_left(lines: list[str], old: str, new: str) -> str | None:
    """Where the file still uses a name the edit took out. Measured on the quality model: asked to
    rename `greet` and update its call, it changed `def greet(name):` and answered that both were done."""
    gone = replaced_names(old, new)
    if not gone:
        return None
    left = []
    for number, line in enumerate(lines, 1):
        names = sorted(w for w in gone if re.search(rf"\b{w}\b", line))
        if names:
            left.append(f"line {number} still has {', '.join(names)}: {line.strip()}")
    if not left:
        return None
    more = f"\n(and {len(left) - SHOWN_LINES} more)" if len(left) > SHOWN_LINES else ""
    return "\n".join(left[:SHOWN_LINES]) + more


def _closest(text: str, old: str) -> list[str]:
    """The file's lines most like the first line of `old`, for the model's next try."""
    first = old.strip().splitlines()[0] if old.strip() else old
    return difflib.get_close_matches(first, text.splitlines(), n=3, cutoff=0.3)

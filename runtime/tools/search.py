"""search_files: the lines of the workspace's text files that contain a text, counted by code.

A small model reads a file and then miscounts or misquotes it: asked how many errors a six-line log
held, the default model answered 1; asked who placed order 1003, it quoted another row. Finding and
counting lines is code's work, and the result says how many there are.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure
from runtime.tools.files import MAX_READ_BYTES, PATH_ERRORS, binary_failure, decode_text, read_regular
from runtime.tools.workspace import is_protected, relative, resolve

MAX_MATCHES = 50
MAX_FILES = 2000
# A matching line is shown up to this many characters: a minified file is one long line.
LINE_CHARS = 300


class SearchFilesArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=200, description="the text to look for; case does not matter")
    path: str = Field(".", min_length=1, max_length=4096, description="a file or a folder, relative to the workspace")


class Match(BaseModel):
    path: str
    line: int = Field(ge=1)
    text: str


class SearchFilesOutput(BaseModel):
    text: str
    count: int = Field(ge=0, description="matching lines, including any left out")
    matches: list[Match]
    omitted: int = Field(0, ge=0, description=f"matching lines left out beyond the first {MAX_MATCHES}")
    files_searched: int = Field(ge=0)


class SearchFiles(Tool[SearchFilesArgs, SearchFilesOutput]):
    contract = ToolContract(
        name="search_files",
        description=(
            "Find the lines that contain a text in one file, or in every text file of a folder and its "
            "subfolders; returns each line with its path and line number, and how many lines match. "
            "Use it to count or to find lines; read_file shows a whole file."
        ),
        input_model=SearchFilesArgs,
        output_model=SearchFilesOutput,
        effects=[Effect.READ],
        idempotent=True,
        scope="workspace",
        timeout_s=10,
        preconditions=("the file or folder exists inside the workspace",),
        errors={
            **PATH_ERRORS,
            "not_found": "no file or folder at that path",
            "binary_file": "the file named is not UTF-8 text",
            "file_too_large": f"the file named is over {MAX_READ_BYTES} bytes",
            "unreadable": "permission denied or an I/O error",
        },
        summary_fields=("text", "count", "omitted", "files_searched"),
    )

    def authorize(self, ctx: ToolContext, args: SearchFilesArgs) -> None:
        resolve(ctx, args.path)

    def run(self, ctx: ToolContext, args: SearchFilesArgs) -> SearchFilesOutput:
        real = resolve(ctx, args.path)
        wanted = args.text.casefold()
        matches: list[Match] = []
        count = searched = 0
        # A folder's files that are not text are passed over; a file named on its own is the call's
        # subject, and what is wrong with it is the call's error.
        for path in _files_in(ctx, real) if real.is_dir() else [real]:
            name = relative(ctx, path)
            lines = _lines(path, name, strict=path == real)
            if lines is None:
                continue
            searched += 1
            for number, line in enumerate(lines, start=1):
                if wanted in line.casefold():
                    count += 1
                    if len(matches) < MAX_MATCHES:
                        matches.append(Match(path=name, line=number, text=line[:LINE_CHARS]))
        return SearchFilesOutput(
            text=args.text, count=count, matches=matches, omitted=count - len(matches), files_searched=searched
        )


def _files_in(ctx: ToolContext, folder: Path):
    """The regular files under `folder`, in name order: agentd's data left out, hidden folders and
    symlinks not followed, as the workspace survey walks."""
    seen = 0
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not is_protected(ctx, Path(parent, d)))
        for name in sorted(files):
            path = Path(parent, name)
            if path.is_symlink() or is_protected(ctx, path):
                continue
            seen += 1
            if seen > MAX_FILES:
                return
            yield path


def _lines(path: Path, name: str, *, strict: bool) -> list[str] | None:
    """The file's lines; for a file that is not UTF-8 text within the read limit, the read's error
    when `strict`, else None."""
    try:
        data = read_regular(path, name, MAX_READ_BYTES)
    except ToolFailure:
        if strict:
            raise
        return None
    text = decode_text(data)
    if text is None and strict:
        raise binary_failure(name, data, hashlib.sha256(data).hexdigest())
    return None if text is None else text.splitlines()

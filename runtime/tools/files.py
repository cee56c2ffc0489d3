"""The file tools: read, write and list text files inside the task's workspace, each leaving an artifact trail."""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import os
import stat
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.atomic import replace_file
from runtime.tools import outline, table
from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure, ToolRefused
from runtime.tools.workspace import is_protected, relative, resolve
from store.events import ArtifactRead

MAX_READ_BYTES = 4 * 1024 * 1024
MAX_WRITE_CHARS = 1024 * 1024
MAX_ENTRIES = 1000
# Enough to tell text from binary without reading a large file twice.
_SNIFF_BYTES = 8192

Sha256 = Field(pattern=r"^[0-9a-f]{64}$")
WorkspacePath = Field(min_length=1, max_length=4096, description="relative to the workspace")

PATH_ERRORS = {
    "outside_workspace": "the path leads out of the workspace ('..', an absolute path or a symlink)",
    "protected_path": "the path lies in agentd's own data",
}


class ReadFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = WorkspacePath


class ReadFileOutput(BaseModel):
    path: str
    size: int = Field(ge=0, description="bytes")
    sha256: str = Sha256
    lines: int = Field(ge=0)
    # Counted by code: asked how many orders a CSV file held, the default model answered with its line
    # count, the header included.
    data_rows: int | None = Field(None, ge=0, description="for a .csv file: its records, the header not counted")
    columns: list[dict[str, str]] | None = Field(
        None, description="for a .csv file: each number column's sum, smallest and largest, computed by code"
    )
    sums_by: list[dict[str, str]] | None = Field(
        None, description="for a .csv file: each number column's sum for each value of a column with few values"
    )
    outline: dict[str, str] | None = Field(
        None, description="counted by code: a JSON file's items, a Python module's functions and classes, "
        "a text file's list items under each heading",
    )
    content: str


class WriteFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = WorkspacePath
    content: str = Field(max_length=MAX_WRITE_CHARS, description="the whole new content, UTF-8")


class WriteFileOutput(BaseModel):
    path: str
    size: int = Field(ge=0, description="bytes")
    sha256: str = Sha256
    created: bool = Field(description="the file did not exist before")
    changed: bool = Field(description="the content differs from what was there")


class ListFilesArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(".", min_length=1, max_length=4096, description="a folder, relative to the workspace")


class Entry(BaseModel):
    # The path from the workspace's root, not the bare name: what read_file takes, so a model can pass
    # it on as it is (a small one otherwise asks read_file for "changelog.md" found in docs/).
    path: str
    kind: Literal["file", "dir", "link", "other"]
    size: int | None = Field(None, description="bytes, for files")


class ListFilesOutput(BaseModel):
    path: str
    count: int = Field(ge=0, description="entries in the folder, including any left out")
    entries: list[Entry]
    omitted: int = Field(0, ge=0, description=f"entries left out beyond the first {MAX_ENTRIES}")


class ReadFile(Tool[ReadFileArgs, ReadFileOutput]):
    contract = ToolContract(
        name="read_file",
        description=(
            "Read one UTF-8 text file from the workspace and return its content, size and sha256. "
            "Use it to look at a file whose path you know; use list_files to find paths. A long file comes "
            "back as its size and sha256 plus an artifact_ref; page through that with read_artifact."
        ),
        input_model=ReadFileArgs,
        output_model=ReadFileOutput,
        effects=[Effect.READ],
        idempotent=True,
        scope="workspace",
        timeout_s=10,
        preconditions=("the file exists inside the workspace and is text",),
        errors={
            **PATH_ERRORS,
            "not_found": "no file at that path",
            "is_directory": "the path is a folder; use list_files",
            "not_a_file": "the path is a device, socket or pipe",
            "binary_file": "the file is not UTF-8 text",
            "file_too_large": f"the file is over {MAX_READ_BYTES} bytes",
            "unreadable": "permission denied or an I/O error",
        },
        summary_fields=("path", "size", "sha256", "lines", "data_rows", "columns", "sums_by", "outline"),
        path_kind="file",
    )

    def authorize(self, ctx: ToolContext, args: ReadFileArgs) -> None:
        resolve(ctx, args.path)

    def run(self, ctx: ToolContext, args: ReadFileArgs) -> ReadFileOutput:
        real = resolve(ctx, args.path)
        name = relative(ctx, real)
        data = read_regular(real, name, MAX_READ_BYTES)
        digest = hashlib.sha256(data).hexdigest()
        content = decode_text(data)
        if content is None:
            raise binary_failure(name, data, digest)
        ctx.record(ArtifactRead(path=name, sha256=digest, size=len(data)))
        lines = content.count("\n") + (0 if not content or content.endswith("\n") else 1)
        is_csv = name.lower().endswith(".csv")
        found = table.figures(content) if is_csv else None
        return ReadFileOutput(
            path=name, size=len(data), sha256=digest, lines=lines, content=content,
            data_rows=_records(content) if is_csv else None,
            columns=found[0] if found else None,
            sums_by=(found[1] or None) if found else None,
            outline=None if is_csv else outline.outline(name, content),
        )


def _records(content: str) -> int:
    """A CSV text's records after its header row, as the csv module reads them (a quoted field may span
    lines); blank lines are not records."""
    rows = [row for row in csv.reader(io.StringIO(content)) if any(cell.strip() for cell in row)]
    return max(len(rows) - 1, 0)


class WriteFile(Tool[WriteFileArgs, WriteFileOutput]):
    contract = ToolContract(
        name="write_file",
        description=(
            "Create or replace one text file in the workspace with the given content, creating folders "
            "as needed. Writing the same content again changes nothing."
        ),
        input_model=WriteFileArgs,
        output_model=WriteFileOutput,
        effects=[Effect.WRITE],
        changes="path",
        removes=("", "content"),
        idempotent=True,
        scope="workspace",
        timeout_s=10,
        preconditions=("the path lies inside the workspace", "the content is the whole file, not a diff"),
        errors={
            **PATH_ERRORS,
            "is_directory": "the path is a folder",
            "not_a_directory": "a folder along the path is a file",
            "not_a_file": "the path is a device, socket or pipe",
            "write_failed": "the file system refused the write (full, read-only, permissions)",
        },
        summary_fields=("path", "size", "sha256", "created", "changed"),
    )

    def authorize(self, ctx: ToolContext, args: WriteFileArgs) -> None:
        resolve(ctx, args.path)

    def run(self, ctx: ToolContext, args: WriteFileArgs) -> WriteFileOutput:
        real = resolve(ctx, args.path)
        name = relative(ctx, real)
        if real == ctx.workspace or real.is_dir():
            raise ToolFailure("is_directory", f"{name} is a folder, not a file", {"path": name})
        data = args.content.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        try:
            old = read_regular(real, name, None)
        except ToolFailure as e:
            if e.code != "not_found":
                raise
            old = None
        if old != data:
            write_atomically(real, name, data)
        return WriteFileOutput(path=name, size=len(data), sha256=digest, created=old is None, changed=old != data)


class ListFiles(Tool[ListFilesArgs, ListFilesOutput]):
    contract = ToolContract(
        name="list_files",
        description=(
            "List the entries of one folder in the workspace (not recursive), sorted by name, with their "
            "paths from the workspace's root, kind and size. Use it to find paths before read_file or write_file."
        ),
        input_model=ListFilesArgs,
        output_model=ListFilesOutput,
        effects=[Effect.READ],
        idempotent=True,
        scope="workspace",
        timeout_s=10,
        preconditions=("the folder exists inside the workspace",),
        errors={**PATH_ERRORS, "not_found": "no folder at that path", "not_a_directory": "the path is a file"},
        summary_fields=("path", "count", "omitted"),
        path_kind="folder",
    )

    def authorize(self, ctx: ToolContext, args: ListFilesArgs) -> None:
        resolve(ctx, args.path)

    def run(self, ctx: ToolContext, args: ListFilesArgs) -> ListFilesOutput:
        real = resolve(ctx, args.path)
        name = relative(ctx, real)
        try:
            with os.scandir(real) as it:
                found = [e for e in it if not is_protected(ctx, Path(e.path))]
        except FileNotFoundError:
            raise ToolFailure("not_found", f"there is no folder {name}", {"path": name}) from None
        except NotADirectoryError:
            raise ToolFailure("not_a_directory", f"{name} is a file; use read_file", {"path": name}) from None
        found.sort(key=lambda e: e.name)
        entries = [_entry(e, name) for e in found[:MAX_ENTRIES]]
        return ListFilesOutput(path=name, count=len(found), entries=entries, omitted=max(0, len(found) - MAX_ENTRIES))


def _entry(e: os.DirEntry[str], folder: str) -> Entry:
    path = e.name if folder == "." else f"{folder}/{e.name}"
    # Nothing is followed: a symlink is reported as a link, wherever it points.
    if e.is_symlink():
        return Entry(path=path, kind="link")
    if e.is_dir(follow_symlinks=False):
        return Entry(path=path, kind="dir")
    if e.is_file(follow_symlinks=False):
        return Entry(path=path, kind="file", size=e.stat(follow_symlinks=False).st_size)
    return Entry(path=path, kind="other")


def read_regular(real: Path, name: str, limit: int | None) -> bytes:
    # O_NOFOLLOW: a symlink swapped in after `resolve` checked the path is refused, not followed.
    # O_NONBLOCK: opening a FIFO must not wait for a writer that never comes.
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolFailure("not_found", f"there is no file {name}", {"path": name}) from None
    except IsADirectoryError:
        raise ToolFailure("is_directory", f"{name} is a folder; use list_files", {"path": name}) from None
    except OSError as e:
        raise _os_failure(e, name) from None
    # Checked on the open descriptor, so it is the file that will be read; fdopen refuses folders anyway.
    st = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(st.st_mode):
        problem = ToolFailure("is_directory", f"{name} is a folder; use list_files", {"path": name})
    elif not stat.S_ISREG(st.st_mode):
        problem = ToolFailure("not_a_file", f"{name} is not a regular file", {"path": name})
    elif limit is not None and st.st_size > limit:
        problem = ToolFailure(
            "file_too_large", f"{name} has {st.st_size} bytes; the limit is {limit}", {"path": name, "size": st.st_size}
        )
    if problem is not None:
        os.close(fd)
        raise problem
    with os.fdopen(fd, "rb") as f:
        if limit is None:
            return f.read()
        data = f.read(limit + 1)
        if len(data) > limit:
            # It grew after fstat.
            raise ToolFailure("file_too_large", f"{name} is over the limit of {limit} bytes", {"path": name})
        return data


def write_atomically(real: Path, name: str, data: bytes) -> None:
    """Replace the file in one step, so a crash leaves the old content or the new, never half of it."""
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
        replace_file(real, data)
    except (FileExistsError, NotADirectoryError):
        raise ToolFailure("not_a_directory", f"a folder along {name} is a file", {"path": name}) from None
    except OSError as e:
        raise _os_failure(e, name, "write_failed") from None


def _os_failure(e: OSError, name: str, code: str = "unreadable") -> ToolFailure:
    if e.errno == errno.ELOOP:
        # Only a symlink created after the containment check gets here.
        return ToolRefused("outside_workspace", f"{name} became a symlink while being opened", {"path": name})
    return ToolFailure(code, f"{name}: {e.strerror or e}", {"path": name})


def decode_text(data: bytes) -> str | None:
    """The bytes as UTF-8 text, or None for a binary file (a NUL near the start, or not UTF-8)."""
    if b"\x00" in data[:_SNIFF_BYTES]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def binary_failure(name: str, data: bytes, digest: str) -> ToolFailure:
    return ToolFailure(
        "binary_file", f"{name} is not UTF-8 text", {"path": name, "size": len(data), "sha256": digest}
    )

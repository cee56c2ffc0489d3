"""Events of the artifact trail: files read, written, changed, deleted and put back, and tests run over them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from store.events._base import Event

Sha256 = Field(pattern=r"^[0-9a-f]{64}$")


class ArtifactRead(Event):
    path: str = Field(min_length=1)
    sha256: str = Sha256
    size: int = Field(ge=0)


class ArtifactWritten(Event):
    """A file a tool wrote, as logs before FileChanged recorded it: the content after, not before."""

    path: str = Field(min_length=1)
    sha256: str = Sha256
    size: int = Field(ge=0)


class FileChanged(Event):
    """A workspace file a tool call created, changed or deleted, with its bytes before and after.

    Both versions are in the artifact store under their hashes (kept before the call ran), so the
    change can be shown as a diff and put back. `before_sha256` is None for a file the call created,
    `after_sha256` None for one it deleted. `mode` is the file's permission bits before (after, for a
    created file), so a file put back is as executable as it was.
    """

    call_id: str = Field(min_length=1)
    path: str = Field(min_length=1)
    before_sha256: str | None = Sha256
    after_sha256: str | None = Sha256
    before_size: int | None = Field(None, ge=0)
    after_size: int | None = Field(None, ge=0)
    mode: int = Field(0o644, ge=0, le=0o7777)


class Restore(BaseModel):
    """One file of a restore: the content it must have now, and the content it is put back to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(min_length=1)
    from_sha256: str | None = Sha256
    to_sha256: str | None = Sha256
    mode: int = Field(0o644, ge=0, le=0o7777)


class RestoreStarted(Event):
    """A person asked to undo (or redo) a task's changes, and every file was found as the task left it.

    Recorded before any file is touched: a restore interrupted by a crash is finished from this list
    (each file not yet restored, and still as the task left it) before anything else writes.
    """

    restore_id: str = Field(min_length=1)
    kind: Literal["undo", "redo"]
    by: str = Field(min_length=1)
    files: tuple[Restore, ...] = Field(min_length=1)


class FileRestored(Event):
    """One file of a restore, put back (or deleted, when `to_sha256` is None)."""

    restore_id: str = Field(min_length=1)
    kind: Literal["undo", "redo"]
    path: str = Field(min_length=1)
    from_sha256: str | None = Sha256
    to_sha256: str | None = Sha256


class RestoreFinished(Event):
    """Every file of the restore is as it asked; `skipped` names files found changed by someone else
    when an interrupted restore was finished, which were left as they were."""

    restore_id: str = Field(min_length=1)
    skipped: tuple[str, ...] = ()


class ArtifactDeleted(Event):
    path: str = Field(min_length=1)


class TestsRan(Event):
    # Not a test class, whatever its name says.
    __test__ = False

    command: str
    status: Literal["passed", "failed", "error"]
    paths: tuple[str, ...] = ()
    summary: str = ""


class WorkspaceSurveyed(Event):
    """The files and folders of a task's workspace as its first request showed them.

    Recorded once, before that request, so that every later request and a replay show the same
    listing whatever the workspace holds by then. Folders end with "/". `complete` is False when the
    workspace held more than the listing could show.
    """

    entries: tuple[str, ...] = ()
    complete: bool = True


class MatchedLine(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(min_length=1)
    line: int = Field(ge=1)
    text: str
    score: float


class ContentMatched(Event):
    """The workspace's lines that best matched the request's words, as the first request showed them.

    Recorded once, before that request, like the survey: later requests and a replay show the same
    lines whatever the files hold by then. `words` are the words looked for; `files` how many files
    the index held.
    """

    words: tuple[str, ...]
    matches: tuple[MatchedLine, ...]
    files: int = Field(ge=0)

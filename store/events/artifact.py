"""Events of the artifact trail: files read, written, deleted, and tests run over them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from store.events._base import Event

Sha256 = Field(pattern=r"^[0-9a-f]{64}$")


class ArtifactRead(Event):
    path: str = Field(min_length=1)
    sha256: str = Sha256
    size: int = Field(ge=0)


class ArtifactWritten(Event):
    path: str = Field(min_length=1)
    sha256: str = Sha256
    size: int = Field(ge=0)


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

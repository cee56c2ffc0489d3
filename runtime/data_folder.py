"""The data folder: found upward from the current folder as git finds .git, made only by a command that writes.

A command that only reads never makes one, nor a database in it: with nothing there it says where it
looked, rather than showing an empty list from a folder it just made in the wrong place.
"""

from __future__ import annotations

from pathlib import Path

from runtime.disk import REFUSALS
from store.errors import AgentdError

NAME = ".agentd"
# Said with the folder it is about; these are the commands that start a data folder from nothing.
MAKERS = "`agentd task submit` or `agentd serve` makes one"


class DataFolderError(AgentdError):
    """The data folder is missing where a command must read it, or is not a folder agentd can use."""


def find(start: Path) -> Path | None:
    """The nearest `.agentd` folder in `start` or a folder above it, or None."""
    for folder in (start, *start.parents):
        candidate = folder / NAME
        if candidate.is_dir():
            return candidate
    return None


def make(path: Path) -> None:
    """Make the data folder if it is not there; what stops it is one line naming the folder."""
    _refuse_a_file(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        _refuse_a_file(path)
        raise
    except NotADirectoryError:
        above = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        raise DataFolderError(f"data folder {path} cannot be made: {above or 'a folder above it'} is a file") from None
    except OSError as e:
        if e.errno in REFUSALS:  # the host's refusal, which the command line says with the file system's name
            raise
        raise DataFolderError(f"data folder {path} cannot be made: {e.strerror or e}") from None


def require(path: Path, database: Path, *, looked_from: Path | None, given_by: str) -> None:
    """Check that there is a data folder to read, and its database in it.

    `looked_from` is the folder the search started in when the folder was not named by a setting;
    `given_by` names the setting that named it otherwise.
    """
    _refuse_a_file(path)
    if not path.is_dir():
        if looked_from is not None:
            raise DataFolderError(f"no data folder ({NAME}) in {looked_from} or any folder above it; {MAKERS} here")
        raise DataFolderError(f"no data folder at {path.absolute()} (data_dir from {given_by}); {MAKERS}")
    if not database.is_file():
        raise DataFolderError(f"no database in the data folder {path.absolute()} yet; {MAKERS}")


def require_database(url: str, *, given_by: str) -> None:
    """Check that the SQLite file a database URL names is there; another database says so when opened."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:  # not a URL at all: the store's own message says so when it tries
        return
    name = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or name in ("", ":memory:") or name.startswith("file:"):
        return
    if not Path(name).is_file():
        raise DataFolderError(f"no database at {Path(name).absolute()} (database_url from {given_by}); {MAKERS}")


def _refuse_a_file(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise DataFolderError(f"data folder {path} is a file, not a folder")

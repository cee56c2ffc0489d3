"""Workspace folders with files in them, for tasks to work in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

# What the agent loop's tests ask about: a release date and its owner.
RELEASE_NOTES = {"notes.txt": "The release is planned for March 3. Owner: Ana.\n"}
# What the framing tests show the model: a README, a CSV file and notes.
SMALL_PROJECT = {"README.md": "# demo\n", "data.csv": "a,b\n1,2\n", "notes.txt": "Release: March 3.\n"}


def workspace_of(tmp_path: Path, files: Mapping[str, str]) -> Path:
    """A workspace folder, `tmp_path/ws`, holding `files` (name: text). conftest's workspace fixtures
    return one."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in files.items():
        (ws / name).write_text(text)
    return ws

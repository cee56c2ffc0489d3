"""The tools agentd ships with: the file tools, search and search_files, the shell, read_artifact,
remember and, where its sandbox can run, python, in one registry."""

from __future__ import annotations

from runtime.sandbox import Sandbox
from runtime.tools.artifact import ReadArtifact
from runtime.tools.contract import Tool
from runtime.tools.edits import AppendFile, EditFile
from runtime.tools.files import ListFiles, ReadFile, WriteFile
from runtime.tools.finder import Search
from runtime.tools.memory import Remember
from runtime.tools.python import Python
from runtime.tools.registry import ToolRegistry
from runtime.tools.search import SearchFiles
from runtime.tools.shell import TIMEOUT_S, Shell


def builtin_tools(*, shell_timeout_s: float = TIMEOUT_S) -> list[Tool]:
    """Fresh instances of the built-in tools, sorted by name. python only where its sandbox runs: a
    snippet is never run without it (`agentd status` says why it is missing)."""
    sandboxed = [Python()] if Sandbox().problem() is None else []
    return [
        AppendFile(), EditFile(), ListFiles(), *sandboxed, ReadArtifact(), ReadFile(), Remember(), Search(),
        SearchFiles(), Shell(timeout_s=shell_timeout_s), WriteFile(),
    ]


def builtin_registry(*, shell_timeout_s: float = TIMEOUT_S) -> ToolRegistry:
    """A registry of the built-in tools; which of them a step may use is the caller's allowlist."""
    return ToolRegistry(builtin_tools(shell_timeout_s=shell_timeout_s))

"""Tools an agent may call: their contracts, the registry that describes them and the executor that runs them."""

from runtime.tools.artifact import FACT_ARTIFACT_REFS, ReadArtifact
from runtime.tools.builtin import builtin_registry, builtin_tools
from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure, ToolRefused
from runtime.tools.edits import AppendFile, EditFile
from runtime.tools.executor import EXECUTOR_ERRORS, MASK_CHARS, ToolOutcome, execute, screen
from runtime.tools.files import ListFiles, ReadFile, WriteFile
from runtime.tools.registry import ToolRegistry
from runtime.tools.shell import Shell, clean_environment

__all__ = [
    "AppendFile",
    "EditFile",
    "EXECUTOR_ERRORS",
    "FACT_ARTIFACT_REFS",
    "MASK_CHARS",
    "Effect",
    "ListFiles",
    "ReadArtifact",
    "ReadFile",
    "Shell",
    "Tool",
    "ToolContext",
    "ToolContract",
    "ToolFailure",
    "ToolOutcome",
    "ToolRefused",
    "ToolRegistry",
    "WriteFile",
    "builtin_registry",
    "builtin_tools",
    "clean_environment",
    "execute",
    "screen",
]

"""The skill resource tools: read a file of a skill the task activated, and run one of its scripts."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure, ToolRefused
from runtime.tools.files import MAX_READ_BYTES, read_regular
from runtime.tools.registry import ToolRegistry
from runtime.tools.shell import (
    OUTPUT_CAP,
    SHELL,
    TIMEOUT_S,
    ShellOutput,
    process_contract,
    run_process,
    with_tails,
)

# The trusted fact naming the skills this task activated: skill name -> absolute folder path, taken from the log.
FACT_ACTIVE_SKILLS = "active_skills"
# What a script finds its own folder by, wherever the skill is installed; its working directory is the workspace.
SKILL_DIR = "SKILL_DIR"
MAX_ARGS = 32
MAX_ARG_CHARS = 1000


def _no_nul(value: str) -> str:
    # A NUL cannot reach a path or an argv; refused as a bad argument instead of crashing the call.
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


SkillName = Annotated[str, Field(min_length=1, max_length=64, description="the name of a skill this task activated")]
SkillPath = Annotated[
    str,
    Field(min_length=1, max_length=4096, description="relative to the skill's folder, e.g. references/guide.md"),
    AfterValidator(_no_nul),
]
Argument = Annotated[str, Field(max_length=MAX_ARG_CHARS), AfterValidator(_no_nul)]

_SKILL_ERRORS = {
    "skill_not_active": "the skill was not activated in this task; activate it first",
    "outside_skill": "the path is absolute or leads out of the skill's folder ('..' or a symlink)",
    "not_found": "the skill has no file at that path",
    "not_a_file": "the path is a folder, device, socket or pipe",
}


class ReadSkillFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    skill: SkillName
    path: SkillPath


class ReadSkillFileOutput(BaseModel):
    skill: str
    path: str = Field(description="relative to the skill's folder")
    size: int = Field(ge=0, description="bytes")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    lines: int = Field(ge=0)
    text: str


class RunSkillScriptArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    skill: SkillName
    script: SkillPath = Field(description="relative to the skill's folder, e.g. scripts/report.py")
    args: list[Argument] = Field(
        default_factory=list, max_length=MAX_ARGS, description="passed to the script as they are; no shell"
    )


class ReadSkillFile(Tool[ReadSkillFileArgs, ReadSkillFileOutput]):
    contract = ToolContract(
        name="read_skill_file",
        description=(
            "Read one UTF-8 text file of a skill this task activated (SKILL.md, references/..., assets/...), "
            "by its path relative to the skill's folder. Use it when the skill's instructions point to a file; "
            "use read_file for files in the workspace. A long file comes back as its size and sha256 plus an "
            "artifact_ref; page through that with read_artifact."
        ),
        input_model=ReadSkillFileArgs,
        output_model=ReadSkillFileOutput,
        effects=[Effect.READ],
        idempotent=True,
        scope="skill",
        needs="skill",
        timeout_s=10,
        preconditions=("the skill was activated in this task", "the file is text"),
        errors={
            **_SKILL_ERRORS,
            "not_text": "the file is not UTF-8 text",
            "file_too_large": f"the file is over {MAX_READ_BYTES} bytes",
            "unreadable": "permission denied or an I/O error",
        },
        summary_fields=("skill", "path", "size", "sha256", "lines"),
    )

    def authorize(self, ctx: ToolContext, args: ReadSkillFileArgs) -> None:
        _resolve(ctx, args.skill, args.path)

    def run(self, ctx: ToolContext, args: ReadSkillFileArgs) -> ReadSkillFileOutput:
        folder, real = _resolve(ctx, args.skill, args.path)
        name = _shown(folder, real)
        data = _read(real, name)
        digest = hashlib.sha256(data).hexdigest()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is None or "\x00" in text:
            raise ToolFailure(
                "not_text", f"{name} is not UTF-8 text", {"path": name, "size": len(data), "sha256": digest}
            )
        # Nothing is recorded in the trail: its paths are workspace paths, and the skill lies outside the workspace.
        lines = text.count("\n") + (0 if not text or text.endswith("\n") else 1)
        return ReadSkillFileOutput(skill=args.skill, path=name, size=len(data), sha256=digest, lines=lines, text=text)


class RunSkillScript(Tool[RunSkillScriptArgs, ShellOutput]):
    def __init__(self, *, timeout_s: float = TIMEOUT_S, output_cap: int = OUTPUT_CAP) -> None:
        self.output_cap = output_cap
        self.contract = process_contract(
            name="run_skill_script",
            description=(
                "Run one script of a skill this task activated (e.g. scripts/report.py) with the given "
                "arguments, in the workspace, and return its exit code, stdout and stderr. A .py file runs with "
                "Python, a .sh file with /bin/sh, any other file only if it is executable. No shell: each "
                "argument reaches the script as it is. A non-zero exit code is a result, not a failure. "
                "Needs a person's approval; never retried."
            ),
            input_model=RunSkillScriptArgs,
            output_model=ShellOutput,
            timeout_s=timeout_s,
            needs="skill",
            preconditions=(
                "the skill was activated in this task",
                "the script needs no input on stdin",
                "secrets are not in its environment",
            ),
            errors={
                **_SKILL_ERRORS,
                "not_runnable": "the file is not a .py or .sh script and not executable",
                "unreadable": "permission denied or an I/O error",
                "timeout": "the script ran past timeout_s; all its processes were killed",
                "spawn_failed": "the script could not be started",
            },
            summary_fields=("exit_code", "stdout_bytes", "stderr_bytes"),
        )

    def authorize(self, ctx: ToolContext, args: RunSkillScriptArgs) -> None:
        _resolve(ctx, args.skill, args.script)

    def run(self, ctx: ToolContext, args: RunSkillScriptArgs) -> ShellOutput:
        folder, real = _resolve(ctx, args.skill, args.script)
        name = _shown(folder, real)
        return run_process(
            [*_launcher(real, name), str(real), *args.args],
            ctx,
            timeout_s=self.contract.timeout_s,
            output_cap=self.output_cap,
            label=name,
            extra_env={SKILL_DIR: str(folder)},
            spawn_details={"script": name},
        )

    def summarize(self, output: ShellOutput) -> dict[str, Any]:
        return with_tails(super().summarize(output), output)


def register_skill_tools(registry: ToolRegistry) -> None:
    """Add read_skill_file and run_skill_script; which a step may use is still the caller's allowlist."""
    registry.register(ReadSkillFile())
    registry.register(RunSkillScript())


def _resolve(ctx: ToolContext, skill: str, path: str) -> tuple[Path, Path]:
    """The skill's real folder and the real path `path` names inside it, or ToolRefused.

    realpath follows every symlink, the folder's own included, so `..` and a symlink at any level
    are judged by where they really end up.
    """
    active = ctx.facts.get(FACT_ACTIVE_SKILLS) or {}
    if skill not in active:
        raise ToolRefused(
            "skill_not_active",
            f"the skill {skill!r} is not active in this task; activate it before using its files",
            {"skill": skill, "active": sorted(active)},
        )
    folder = Path(os.path.realpath(active[skill]))
    if os.path.isabs(path):
        # The skill's folder is a machine path the model need not know; files are named relative to it.
        raise ToolRefused(
            "outside_skill",
            f"{path!r} is absolute; name the file relative to the skill's folder, e.g. SKILL.md",
            {"skill": skill, "path": path},
        )
    real = Path(os.path.realpath(folder / path))
    if not real.is_relative_to(folder):
        raise ToolRefused(
            "outside_skill",
            f"{path!r} resolves to a place outside the skill's folder (through '..' or a symlink)",
            {"skill": skill, "path": path},
        )
    return folder, real


def _shown(folder: Path, real: Path) -> str:
    return real.relative_to(folder).as_posix()


def _regular_file(real: Path, name: str) -> None:
    try:
        st = os.stat(real)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolFailure("not_found", f"the skill has no file {name}", {"path": name}) from None
    except OSError as e:
        raise ToolFailure("unreadable", f"{name}: {e.strerror or e}", {"path": name}) from None
    if not stat.S_ISREG(st.st_mode):
        what = "is a folder" if stat.S_ISDIR(st.st_mode) else "is a device, socket or pipe"
        raise ToolFailure("not_a_file", f"{name} {what}, not a file", {"path": name})


def _read(real: Path, name: str) -> bytes:
    _regular_file(real, name)
    try:
        return read_regular(real, name, MAX_READ_BYTES)
    except ToolFailure as e:
        # Only a file swapped after the checks above gets here; the file tools' wording would point at the workspace.
        if e.code == "is_directory":
            raise ToolFailure("not_a_file", f"{name} is a folder, not a file", e.details) from None
        if e.code == "outside_workspace":
            raise ToolRefused("outside_skill", f"{name} became a symlink while being opened", e.details) from None
        raise


def _launcher(real: Path, name: str) -> list[str]:
    """What runs the script, before its path: an interpreter by suffix, or nothing for an executable."""
    _regular_file(real, name)
    if real.suffix == ".py":
        # agentd's own interpreter: the one Python known to exist here.
        return [sys.executable]
    if real.suffix == ".sh":
        return [SHELL]
    if os.access(real, os.X_OK):
        # The kernel honours its shebang line.
        return []
    raise ToolRefused(
        "not_runnable",
        f"{name} is not a .py or .sh script and not executable; read it with read_skill_file instead",
        {"script": name},
    )

"""The shell tool: one command under /bin/sh in the workspace, with a deadline, an output cap and no secrets."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure

SHELL = "/bin/sh"
TIMEOUT_S = 60.0
# Bytes kept per stream, half from the start and half from the end: the start says what ran, the end how it ended.
OUTPUT_CAP = 16 * 1024
TAIL_CHARS = 600
POLL_S = 0.05
# A variable whose name contains one of these never reaches the command.
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
HIDDEN_PREFIXES = ("AGENTD_",)



def process_contract(**fields: Any) -> ToolContract:
    """The contract of a tool that runs a program in the workspace (a command, a skill's script, a
    background job): a program can do anything, so its effect is external, it waits for a person's
    approval, and it is never retried."""
    return ToolContract(effects=[Effect.EXTERNAL], idempotent=False, needs_approval=True, scope="workspace", **fields)

class ShellArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1, max_length=10_000, description="one /bin/sh command line")


class ShellOutput(BaseModel):
    exit_code: int = Field(description="negative: killed by that signal")
    stdout: str
    stderr: str
    stdout_bytes: int = Field(ge=0, description="bytes written, including any cut from the middle")
    stderr_bytes: int = Field(ge=0, description="bytes written, including any cut from the middle")


def with_tails(summary: dict[str, Any], output: ShellOutput) -> dict[str, Any]:
    """A masked process result's summary plus the ends of its output streams.

    The end of the output usually holds the error; a summary without it would hide the only evidence.
    """
    return {**summary, "stdout_tail": output.stdout[-TAIL_CHARS:], "stderr_tail": output.stderr[-TAIL_CHARS:]}


def clean_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without anything that looks like a secret or like agentd's own settings."""
    return {
        name: value
        for name, value in environ.items()
        if not any(marker in name.upper() for marker in SECRET_MARKERS)
        and not name.upper().startswith(HIDDEN_PREFIXES)
    }


class Shell(Tool[ShellArgs, ShellOutput]):
    def __init__(self, *, timeout_s: float = TIMEOUT_S, output_cap: int = OUTPUT_CAP) -> None:
        self.output_cap = output_cap
        self.contract = process_contract(
            name="shell",
            description=(
                "Run one command with /bin/sh in the workspace and return its exit code, stdout and stderr. "
                "A non-zero exit code is a result, not a failure. Use it to build, test or inspect; use "
                "read_file, write_file and list_files for files. Needs a person's approval; never retried. "
                "Processes it leaves in the background are killed when it ends."
            ),
            input_model=ShellArgs,
            output_model=ShellOutput,
            timeout_s=timeout_s,
            preconditions=("the command needs no input on stdin", "secrets are not in its environment"),
            errors={
                "timeout": "the command ran past timeout_s; all its processes were killed",
                "spawn_failed": "the shell could not be started",
            },
            summary_fields=("exit_code", "stdout_bytes", "stderr_bytes"),
        )

    def run(self, ctx: ToolContext, args: ShellArgs) -> ShellOutput:
        return run_process(
            [SHELL, "-c", args.command],
            ctx,
            timeout_s=self.contract.timeout_s,
            output_cap=self.output_cap,
            label="the command",
            program=SHELL,
        )

    def summarize(self, output: ShellOutput) -> dict[str, Any]:
        return with_tails(super().summarize(output), output)


def run_process(
    argv: list[str],
    ctx: ToolContext,
    *,
    timeout_s: float,
    output_cap: int,
    label: str,
    program: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    spawn_details: dict[str, Any] | None = None,
) -> ShellOutput:
    """Run `argv` in the workspace with a clean environment, no stdin, capped output and a deadline.

    Whatever it leaves in the background is killed when it ends. The error messages call it `label`,
    or `program` when it cannot be started; `spawn_details` go with that failure. Raises ToolFailure
    `spawn_failed`, or `timeout` when the deadline passes or the call is cancelled.
    """
    env = clean_environment(os.environ)
    env["PWD"] = str(ctx.workspace)
    env.update(extra_env or {})
    deadline = ctx.deadline if ctx.deadline is not None else time.monotonic() + timeout_s
    try:
        proc = subprocess.Popen(
            argv,
            cwd=ctx.workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # Its own process group, so one signal reaches everything the process started.
            start_new_session=True,
        )
    except OSError as e:
        raise ToolFailure(
            "spawn_failed", f"cannot start {program or label}: {e.strerror or e}", spawn_details
        ) from None
    assert proc.stdout is not None and proc.stderr is not None
    out, err = Capture(proc.stdout, output_cap), Capture(proc.stderr, output_cap)

    finished = False
    try:
        while not (finished := exited(proc.pid)):
            if ctx.cancelled.is_set() or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
    finally:
        # Before reaping: while the leader is a zombie its pid, and so the group id, cannot be reused.
        kill_group(proc.pid)
        proc.wait()
        out.join(1.0)
        err.join(1.0)

    if not finished:
        raise ToolFailure(
            "timeout",
            f"{label} did not finish within {timeout_s:g}s; its processes were killed",
            {"stdout_tail": out.text()[-TAIL_CHARS:], "stderr_tail": err.text()[-TAIL_CHARS:]},
        )
    return ShellOutput(
        exit_code=proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
    )


def exited(pid: int) -> bool:
    """Has the process ended? Asked without reaping it, so its process group stays addressable."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Capture(threading.Thread):
    """Drains one pipe, keeping its first and last `cap / 2` bytes and counting the rest."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(name="shell-capture", daemon=True)
        self.stream = stream
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.start()

    def run(self) -> None:
        fd = self.stream.fileno()
        try:
            while chunk := os.read(fd, 65536):
                self.total += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    del self.tail[: max(0, len(self.tail) - self.half)]
        finally:
            self.stream.close()

    def text(self) -> str:
        head, tail = bytes(self.head), bytes(self.tail)
        omitted = self.total - len(head) - len(tail)
        if omitted <= 0:
            return (head + tail).decode("utf-8", errors="replace")
        return (
            head.decode("utf-8", errors="replace")
            + f"\n[... {omitted} bytes omitted ...]\n"
            + tail.decode("utf-8", errors="replace")
        )

"""The python tool: a snippet the model writes, run in the sandbox over a read-only workspace.

A small coding model reads and counts poorly and writes a line of Python well: counting a CSV file's
rows, summing a column, picking a row or parsing a config file is one `print(...)` for it, and many
error-prone tokens of reading. The snippet can read the workspace and nothing else of the host, and
can change nothing but a scratch folder that is discarded, so the tool's effect is `read`: it needs
no approval, like read_file.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.sandbox import Sandbox
from runtime.tools.contract import Effect, Tool, ToolContext, ToolContract, ToolFailure
from runtime.tools.shell import ShellOutput, run_process, with_tails

TIMEOUT_S = 20.0
OUTPUT_CAP = 16 * 1024


class PythonArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1, max_length=20_000,
                      description="Python 3 code; print() what you want to see. Paths are relative to the workspace.")


class Python(Tool[PythonArgs, ShellOutput]):
    def __init__(self, sandbox: Sandbox | None = None, *, timeout_s: float = TIMEOUT_S) -> None:
        self.sandbox = sandbox or Sandbox()
        self.contract = ToolContract(
            name="python",
            description=(
                "Run a short Python 3 program and return what it prints. The workspace is its current "
                "folder, read-only; it has the standard library (csv, json, tomllib, configparser, re), no "
                "network, and /tmp for scratch files that are thrown away. Use it to count, sum, filter, sort "
                "or parse file contents exactly: print the result."
            ),
            input_model=PythonArgs,
            output_model=ShellOutput,
            effects=[Effect.READ],
            idempotent=True,
            scope="workspace",
            timeout_s=timeout_s,
            errors={
                "timeout": "the program ran past timeout_s; it was killed",
                "sandbox_unavailable": "the sandbox cannot run on this host; the message says why",
                "spawn_failed": "the sandbox could not be started",
            },
            summary_fields=("exit_code", "stdout_bytes", "stderr_bytes"),
        )

    def run(self, ctx: ToolContext, args: PythonArgs) -> ShellOutput:
        problem = self.sandbox.problem()
        if problem is not None:
            raise ToolFailure("sandbox_unavailable", problem)
        with self.sandbox.command(args.code, ctx.workspace, hidden=ctx.protected) as argv:
            return run_process(argv, ctx, timeout_s=self.contract.timeout_s, output_cap=OUTPUT_CAP,
                               label="the program", program="bwrap")

    def summarize(self, output: ShellOutput) -> dict[str, Any]:
        return with_tails(super().summarize(output), output)

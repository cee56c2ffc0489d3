"""What test modules share. A test module imports this package and the conftest fixtures, never another
test module.

The helpers whose names say what they are on their own are importable from here. Those read in the
context of their module are imported from it: `page` (the page over HTTP), `browser` (the page in
chromium), `skill` (SKILL.md files), `prompt` (calls on the model itself), `store_contract` (what every
store backend must do), `model_server` (the scripted model endpoint, also run as a program),
`mcp_server` (an MCP server written with the SDK, run as a program) and `mcp_servers` (settings and a
gateway for it)."""

from tests.helpers.case import lay_out_case, recorded_run
from tests.helpers.cli import one_error_line, run_agentd, serve_refused
from tests.helpers.daemon import approvals, scripted_endpoint, serving, show, wait_until
from tests.helpers.port import free_port, wait_for_port
from tests.helpers.process import process_gone
from tests.helpers.repo import FIXTURES, REPO
from tests.helpers.task import (
    EVERYTHING,
    RELEASE_QUESTION,
    SUMMARY,
    answer,
    call,
    events,
    framing_runtime,
    make_runtime,
    options,
    run,
    scripted,
    scripted_runtime,
    submit,
    tell,
    user_turn,
)
from tests.helpers.workspace import RELEASE_NOTES, SMALL_PROJECT, workspace_of

__all__ = [
    "EVERYTHING",
    "FIXTURES",
    "RELEASE_NOTES",
    "RELEASE_QUESTION",
    "REPO",
    "SMALL_PROJECT",
    "SUMMARY",
    "answer",
    "approvals",
    "call",
    "events",
    "framing_runtime",
    "free_port",
    "lay_out_case",
    "make_runtime",
    "one_error_line",
    "options",
    "process_gone",
    "recorded_run",
    "run",
    "run_agentd",
    "scripted",
    "scripted_endpoint",
    "scripted_runtime",
    "serve_refused",
    "serving",
    "show",
    "submit",
    "tell",
    "user_turn",
    "wait_for_port",
    "wait_until",
    "workspace_of",
]

"""The approvals page in a real browser: Debian's chromium, headless, driven through playwright, against
`agentd serve` on the scripted model endpoint, as a person deciding from the page would use it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Locator, Page

from runtime.daemon.lock import holder
from tests.helpers import approvals, serving, show, wait_until
from tests.helpers.browser import page_of, phase_shown, screenshot, signed_in

# shell needs a person's approval and has effect external. Its arguments and reason carry markup, which
# the page must show as the characters the command will run with, never as elements.
ARGUMENTS = {"command": "echo '<b>approved</b>' > approved.txt"}
REPLIES = [
    {"action": "call_tool", "tool": "shell", "arguments": ARGUMENTS, "reason": "check <i>it</i>"},
    {"action": "final_answer", "answer": "done", "sources": []},
]
SUBMIT = ("--max-steps", "4", "--allow", "external", "Write approved.txt")
# After a denial an answer that says "done" claims a change nothing made, and the task fails for it;
# the scripted model answers as a truthful one would.
DENIED_ANSWER = "The command was denied, so approved.txt was not written."
DENIED_REPLIES = [REPLIES[0], {"action": "final_answer", "answer": DENIED_ANSWER, "sources": []}]
DENIAL = "Not on the shared machine: write the file with write_file instead."


@pytest.mark.slow
def test_approving_on_the_page_runs_the_exact_command_shown_and_the_task_completes(
    agentd, browser: Browser, tmp_path: Path
) -> None:
    with serving(agentd, tmp_path, REPLIES, SUBMIT) as (env, task_id):
        approval = awaited_approval(agentd, env)
        with signed_in(browser, env) as (page, base):
            page.goto(f"{base}approvals")
            article = shown_approval(page, approval)
            screenshot(page, tmp_path / "approvals.png")
            decide(page, article.locator("button[name=decision][value=approve]"))
            page.goto(f"{base}tasks/{task_id}")
            assert phase_shown(page, "completed") == "completed"
            screenshot(page, tmp_path / "task.png")
        state = show(agentd, task_id, env)
    assert [(a["tool"], a["status"]) for a in state["actions"]] == [("shell", "ok")]
    assert [a["status"] for a in state["approvals"]] == ["granted"]
    assert (tmp_path / "ws" / "approved.txt").read_text() == "<b>approved</b>\n"


@pytest.mark.slow
def test_denying_on_the_page_with_a_reason_tells_the_task_why_and_nothing_runs(
    agentd, browser: Browser, tmp_path: Path
) -> None:
    with serving(agentd, tmp_path, DENIED_REPLIES, SUBMIT) as (env, task_id):
        approval = awaited_approval(agentd, env)
        with signed_in(browser, env) as (page, base):
            page.goto(f"{base}approvals")
            article = shown_approval(page, approval)
            article.locator("input[name=reason]").fill(DENIAL)
            screenshot(page, tmp_path / "deny.png")
            decide(page, article.locator("button[name=decision][value=deny]"))
            page.goto(f"{base}tasks/{task_id}")
            # The scripted model answers next, so the task ends with its answer, not stuck on the denial.
            assert phase_shown(page, "completed") == "completed"
            screenshot(page, tmp_path / "task.png")
        denied = logged(agentd, env, task_id, "ApprovalDenied")
        answers = logged(agentd, env, task_id, "AnswerGiven")
        state = show(agentd, task_id, env)
    assert [(d["approval_id"], d["reason"]) for d in denied] == [(approval["approval_id"], DENIAL)]
    assert [a["answer"] for a in answers] == [DENIED_ANSWER]
    assert [(a["tool"], a["status"]) for a in state["actions"]] == [("shell", "denied")]
    assert not (tmp_path / "ws" / "approved.txt").exists(), "a denied command ran"


@pytest.mark.slow
def test_an_approval_decided_elsewhere_leaves_the_open_page_without_a_reload(
    agentd, browser: Browser, tmp_path: Path
) -> None:
    with serving(agentd, tmp_path, REPLIES, SUBMIT) as (env, task_id):
        approval = awaited_approval(agentd, env)
        with signed_in(browser, env) as (page, base):
            with page.expect_response(lambda r: urlsplit(r.url).path == "/stream", timeout=10_000):
                page.goto(f"{base}approvals")
            article = shown_approval(page, approval)
            # A navigation would take this with it: still there at the end means the page was not reloaded.
            page.evaluate("window.sameDocument = true")
            decided = agentd("approvals", "approve", approval["approval_id"], env=env)
            assert decided.returncode == 0, decided.stderr
            article.wait_for(state="detached", timeout=10_000)
            assert page.evaluate("window.sameDocument === true"), "the page reloaded instead of updating"
            screenshot(page, tmp_path / "approvals-after.png")


@pytest.mark.slow
def test_without_the_token_the_page_answers_401_and_shows_nothing_of_the_approval(
    agentd, browser: Browser, tmp_path: Path
) -> None:
    with serving(agentd, tmp_path, REPLIES, SUBMIT) as (env, task_id):
        approval = awaited_approval(agentd, env)
        base, _ = page_of(env)
        context = browser.new_context()
        try:
            page = context.new_page()
            for path in ("approvals", f"tasks/{task_id}", "events", "", "?token=not-the-page-token"):
                response = page.goto(f"{base}{path}")
                assert response is not None and response.status == 401, f"/{path} answered {response.status}"
                body = page.content()
                for secret in (approval["approval_id"], task_id, "approved.txt"):
                    assert secret not in body, f"/{path} shows {secret!r} without the token"
            screenshot(page, tmp_path / "unauthorized.png")
            assert not context.cookies(), "a session cookie was given without the token"
        finally:
            context.close()
        assert [a["approval_id"] for a in approvals(agentd, env)] == [approval["approval_id"]]


@pytest.mark.slow
def test_agentd_stops_cleanly_while_an_open_page_listens_for_live_updates(
    agentd, browser: Browser, tmp_path: Path
) -> None:
    """A browser tab left open must not hold `agentd stop` (SIGTERM) up: serving asserts exit 0."""
    context = browser.new_context()
    pid = None
    try:
        with serving(agentd, tmp_path, REPLIES, SUBMIT) as (env, _):
            awaited_approval(agentd, env)
            base, token = page_of(env)
            pid = holder(Path(env["AGENTD_DATA_DIR"]))[0]
            page = context.new_page()
            page.goto(f"{base}?token={token}")
            with page.expect_response(lambda r: urlsplit(r.url).path == "/stream", timeout=10_000):
                page.goto(f"{base}approvals")
    finally:
        context.close()
        # If it hung, serving gave up on it: do not leave it running after the test.
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- helpers -------------------------------------------------------------------------------------------


def awaited_approval(agentd, env: dict) -> dict:
    pending = wait_until(lambda: approvals(agentd, env))
    assert pending, "the task never asked to approve its shell command"
    assert pending[0]["tool"] == "shell" and pending[0]["arguments"] == ARGUMENTS
    return pending[0]


def shown_approval(page: Page, approval: dict) -> Locator:
    """The approval's article, once it is there, checked to show the exact arguments as text."""
    article = page.locator(f'article.approval[id="{approval["approval_id"]}"]')
    article.wait_for(timeout=10_000)
    shown = article.locator("pre.arguments").text_content()
    assert json.loads(shown) == approval["arguments"] == ARGUMENTS
    assert "<b>approved</b>" in shown
    assert article.locator("b, i").count() == 0, "markup from the model became elements on the page"
    return article


def decide(page: Page, button: Locator) -> None:
    """Click a decision and wait for its POST and the page after it; the approval must be gone then."""
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        button.click()
    assert posted.value.status < 400, f"the decision was refused: {posted.value.status}"
    page.wait_for_load_state()
    button.wait_for(state="detached", timeout=10_000)


def logged(agentd, env: dict, task_id: str, event_type: str) -> list[dict]:
    """Payloads of this task's events of one type, as `agentd events list` gives them."""
    out = agentd("events", "list", "--task", task_id, "--type", event_type, "--json", env=env)
    assert out.returncode == 0, out.stderr
    return [json.loads(line)["payload"] for line in out.stdout.splitlines()]


# -- a task's changes, undone from the page --------------------------------------------------------------

TODO = b"- buy milk\n- call the plumber\n"
# The user's first todo.txt run: the edit replaces "buy milk" and the answer calls it a success.
EDIT_REPLIES = [
    {"action": "call_tool", "tool": "read_file", "arguments": {"path": "todo.txt"}, "reason": "r"},
    {"action": "call_tool", "tool": "edit_file", "reason": "r",
     "arguments": {"path": "todo.txt", "old": "buy milk", "new": "- water the plants <b>now</b>"}},
    {"action": "final_answer", "answer": "todo.txt was successfully updated.", "sources": []},
]
EDIT_SUBMIT = (
    "--max-steps", "6", "--allow", "write", 'Replace the list in todo.txt with the line "- water the plants"'
)


@pytest.mark.slow
def test_the_task_page_shows_the_diff_and_undo_confirmed_there_puts_the_file_back(
    agentd, browser: Browser, tmp_path: Path
) -> None:
    todo = tmp_path / "ws" / "todo.txt"
    todo.parent.mkdir()
    todo.write_bytes(TODO)
    with serving(agentd, tmp_path, EDIT_REPLIES, EDIT_SUBMIT) as (env, task_id):
        with signed_in(browser, env) as (page, base):
            page.goto(f"{base}tasks/{task_id}")
            assert phase_shown(page, "completed") == "completed"
            top = page.locator("section.top")
            assert top.locator("dd.outcome-answer").text_content().strip() == "todo.txt was successfully updated."
            change = top.locator("article.change", has=page.locator("code.path", has_text="todo.txt"))
            assert change.locator(".d-del").all_text_contents() == ["-- buy milk\n"]
            assert change.locator(".d-add").all_text_contents() == ["+- - water the plants <b>now</b>\n"]
            assert change.locator("pre.diff b").count() == 0, "file content became elements on the page"
            assert change.locator(".counts").text_content().split() == ["+1", "-1"]
            # The block is at the top: above the timeline, seen without scrolling.
            assert change.bounding_box()["y"] < page.locator("ol.timeline").bounding_box()["y"]
            screenshot(page, tmp_path / "changes.png")

            top.locator("button.undo", has_text="Undo all changes").click()
            page.wait_for_url(f"**/tasks/{task_id}/undo*")
            assert todo.read_bytes() != TODO, "asking to undo undid"
            assert page.locator(".verb").all_text_contents() == ["put back"]
            screenshot(page, tmp_path / "confirm.png")
            with page.expect_response(lambda r: r.request.method == "POST") as posted:
                page.locator("button[name=confirm][value=undo]").click()
            assert posted.value.status == 303, f"the undo was refused: {posted.value.status}"
            page.wait_for_url(f"**/tasks/{task_id}?done=*")
            assert page.locator(".flash").text_content().startswith("Undone by web:")
            assert todo.read_bytes() == TODO
            assert page.locator("section.top button.redo").count() == 2
            screenshot(page, tmp_path / "undone.png")
        restores = logged(agentd, env, task_id, "RestoreStarted")
    assert [(r["kind"], r["by"].startswith("web:")) for r in restores] == [("undo", True)]

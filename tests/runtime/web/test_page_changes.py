"""A task's page over HTTP: its answer and the files it changed at the top, and Undo and Redo from the page,
confirmed, bound to the session's CSRF token and to the task as shown, with the same checks as `task undo`.

The tasks are run by the real loop on a scripted model, so the changes, the log and the restores are real."""

from __future__ import annotations

import html
import re
from pathlib import Path

import httpx
import pytest
from markupsafe import escape

from runtime.artifacts import ArtifactStore
from runtime.web import access
from runtime.web.app import create_app
from store import EventStore
from store.events import FileRestored, RestoreStarted
from tests.helpers import answer, call, events, run, scripted_runtime, submit
from tests.helpers.page import SCRIPT, TestClient, login, nonce

TODO = b"- buy milk\n- call the plumber\n"
EDITED = b"- - water the plants\n- call the plumber\n"
NOTES = b"Meeting on Monday.\n"
ANSWER = "todo.txt was successfully updated; the file size was increased by 100 characters."


@pytest.fixture
def todo_notes_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "todo.txt").write_bytes(TODO)
    (ws / "notes.txt").write_bytes(NOTES)
    return ws


@pytest.fixture
def client(store: EventStore, data_dir: Path) -> TestClient:
    token = access.page_token(data_dir)
    app = create_app(store, "test-model", token=token, artifacts=ArtifactStore(data_dir / "artifacts"))
    return login(app, token)


def task(store: EventStore, data_dir: Path, workspace: Path, replies: list[dict],
         goal: str = 'Replace the list in todo.txt with the line "- water the plants"') -> str:
    rt = scripted_runtime(store, data_dir, replies)
    task_id = submit(store, workspace, goal, allowed_effects=("read", "write"))
    run(rt, task_id)
    return task_id


@pytest.fixture
def edited(store: EventStore, data_dir: Path, todo_notes_workspace: Path) -> str:
    """The user's first todo.txt run: an edit that replaced "buy milk", answered as a success; and a note."""
    task_id = task(store, data_dir, todo_notes_workspace, [
        call("read_file", path="todo.txt"),
        call("read_file", path="notes.txt"),
        call("edit_file", path="todo.txt", old="buy milk", new="- water the plants"),
        call("append_file", path="notes.txt", text="Plants watered."),
        answer(ANSWER),
    ], goal='Replace the list in todo.txt with the line "- water the plants", and say so in notes.txt')
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED
    return task_id


# -- talking to the page ------------------------------------------------------------------------


def confirmation(client: TestClient, task_id: str, kind: str = "undo", path: str | None = None) -> dict[str, str]:
    """The confirmation page's form, as the browser would post it."""
    page = client.get(f"/tasks/{task_id}/{kind}", params={"path": path} if path else None)
    assert page.status_code == 200, problem(page)
    form = re.search(rf'<form method="post" action="/tasks/{task_id}/{kind}".*?</form>', page.text, re.S)
    assert form, page.text
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form.group(0)))
    button = re.search(r'<button name="confirm" value="(\w+)">', form.group(0))
    return {**{k: html.unescape(v) for k, v in fields.items()}, "confirm": button.group(1)}


def confirm(client: TestClient, task_id: str, kind: str = "undo", path: str | None = None) -> httpx.Response:
    return client.post(f"/tasks/{task_id}/{kind}", data=confirmation(client, task_id, kind, path))


def problem(response: httpx.Response) -> str:
    found = re.search(r'<p class="problem" role="alert">(.*?)</p>', response.text, re.S)
    return html.unescape(found.group(1)) if found else ""


def top(page: str) -> str:
    """The page above its timeline."""
    return page.split("<h2>Timeline</h2>")[0]


def restores(store: EventStore, task_id: str) -> list:
    return events(store, task_id, (RestoreStarted, FileRestored))


# -- the top of the page --------------------------------------------------------------------------


def test_the_top_of_a_task_page_shows_its_answer_and_the_diff_of_each_file_it_changed(
    client, store, edited
) -> None:
    page = client.get(f"/tasks/{edited}")
    assert page.status_code == 200
    head = top(page.text)
    assert '<dt>Answer</dt><dd class="outcome outcome-answer"><div class="answer">' + str(escape(ANSWER)) in head
    todo = head[head.index('<code class="path">todo.txt</code>'):head.index('<code class="path">notes.txt</code>')]
    assert '<span class="plus">+1</span> <span class="minus">-1</span>' in todo
    # The line the edit lost, and the one it wrote, as the net diff of the file.
    assert '<span class="d-del">-- buy milk\n</span><span class="d-add">+- - water the plants\n</span>' in todo
    assert '<span class="d-ctx"> - call the plumber\n</span>' in todo
    assert '<span class="d-add">+Plants watered.' in head
    assert f'<form method="get" action="/tasks/{edited}/undo"><button class="undo">Undo all changes</button>' in head
    assert head.count('class="restore-one"') == 2


def test_a_diff_shows_the_files_markup_as_text(client, store, data_dir, todo_notes_workspace) -> None:
    task_id = task(store, data_dir, todo_notes_workspace, [
        call("write_file", path="page.html", content=f'<p title="x">{SCRIPT}</p>\n'),
        answer("page.html now holds the paragraph."),
    ], goal="Write page.html")
    page = client.get(f"/tasks/{task_id}").text
    assert str(escape(f'+<p title="x">{SCRIPT}</p>')) in page
    assert SCRIPT not in page and '<p title="x">' not in page
    assert (todo_notes_workspace / "page.html").read_text() == f'<p title="x">{SCRIPT}</p>\n'


def test_a_failed_task_says_why_at_the_top_and_that_it_changed_nothing(client, store, data_dir, tmp_path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "settings.yaml").write_text("version: 0.7.1\n")
    task_id = task(store, data_dir, ws, [
        call("read_file", path="settings.yaml"),
        call("edit_file", path="settings.yaml", old="0.7.0", new="0.8.0"),
        answer("The project version was bumped to 0.8.0."),
        answer("The project version was bumped to 0.8.0."),
    ], goal="Bump the project version to 0.8.0")
    head = top(client.get(f"/tasks/{task_id}").text)
    failed = re.search(r'<dt>Failed</dt><dd class="outcome outcome-failed"><div class="answer">(.*?)</div>', head, re.S)
    assert failed and "nothing was changed" in html.unescape(failed.group(1))
    assert '<p class="empty">No files changed.</p>' in head
    assert "/undo" not in head


def test_without_an_artifact_store_the_page_lists_the_files_and_offers_no_undo(
    store, data_dir, todo_notes_workspace, edited
) -> None:
    token = access.page_token(data_dir)
    client = login(create_app(store, "test-model", token=token), token)
    head = top(client.get(f"/tasks/{edited}").text)
    assert '<code class="path">todo.txt</code>' in head and "d-del" not in head
    assert "/undo" not in head.split("agentd task undo")[0]
    refused = client.get(f"/tasks/{edited}/undo")
    assert refused.status_code == 409 and "agentd task undo" in problem(refused)
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED


# -- undo and redo ----------------------------------------------------------------------------------


def test_the_undo_address_only_asks_to_confirm_and_shows_what_it_would_put_back(
    client, store, todo_notes_workspace, edited
) -> None:
    page = client.get(f"/tasks/{edited}/undo")
    assert page.status_code == 200
    assert '<span class="verb">put back</span> <code class="path">todo.txt</code>' in page.text
    # What the undo does to the file as it is now: the lost line comes back.
    assert '<span class="d-del">-- - water the plants\n</span><span class="d-add">+- buy milk\n</span>' in page.text
    assert '<button name="confirm" value="undo">Yes, undo 2 files</button>' in page.text
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED
    assert restores(store, edited) == []


def test_an_undo_without_the_csrf_token_is_refused_and_changes_nothing(
    client, store, todo_notes_workspace, edited
) -> None:
    form = confirmation(client, edited)
    for csrf in (None, "", "0" * 64):
        fields = {k: v for k, v in form.items() if k != "csrf"} | ({} if csrf is None else {"csrf": csrf})
        refused = client.post(f"/tasks/{edited}/undo", data=fields)
        assert refused.status_code == 403, csrf
        assert "nothing was recorded" in problem(refused)
    # Another session's token is not this one's.
    other = TestClient(client.app, follow_redirects=False)
    other.cookies.set(access.SESSION_COOKIE, access.new_session("not-the-page-token"))
    assert other.post(f"/tasks/{edited}/undo", data=form).status_code == 401
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED
    assert (todo_notes_workspace / "notes.txt").read_bytes() == NOTES + b"Plants watered.\n"
    assert restores(store, edited) == []


def test_an_undo_that_skips_the_confirmation_is_refused_and_changes_nothing(
    client, store, todo_notes_workspace, edited
) -> None:
    form = confirmation(client, edited)
    for fields in ({k: v for k, v in form.items() if k != "confirm"}, {**form, "confirm": "redo"},
                   {k: v for k, v in form.items() if k != "version"}):
        refused = client.post(f"/tasks/{edited}/undo", data=fields)
        assert refused.status_code == 400
        assert problem(refused) == "The undo must be confirmed on its own page, for the changes shown there; " \
                                   "nothing was done."
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED
    assert restores(store, edited) == []


def test_an_undo_confirmed_with_the_csrf_token_restores_the_files_and_redo_makes_them_again(
    client, store, todo_notes_workspace, edited
) -> None:
    done = confirm(client, edited)
    assert done.status_code == 303, problem(done)
    assert done.headers["location"].startswith(f"/tasks/{edited}?done=r-")
    assert (todo_notes_workspace / "todo.txt").read_bytes() == TODO
    assert (todo_notes_workspace / "notes.txt").read_bytes() == NOTES
    [started] = events(store, edited, RestoreStarted)
    assert (started.kind, started.by) == ("undo", f"web:{nonce(client)}")

    page = client.get(done.headers["location"]).text
    assert f'<p class="flash" role="status">Undone by web:{nonce(client)}: put back todo.txt, put back notes.txt.</p>' \
        in page
    head = top(page)
    assert "Undo all changes" not in head and "Redo all changes" in head
    assert head.count("undone: back as before the task") == 2

    assert confirm(client, edited, "redo").status_code == 303
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED
    assert (todo_notes_workspace / "notes.txt").read_bytes() == NOTES + b"Plants watered.\n"


def test_one_file_is_undone_alone_from_its_own_button(client, store, todo_notes_workspace, edited) -> None:
    assert confirm(client, edited, path="notes.txt").status_code == 303
    assert (todo_notes_workspace / "notes.txt").read_bytes() == NOTES
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED
    head = top(client.get(f"/tasks/{edited}").text)
    assert "Undo all changes" in head and "Redo all changes" in head


def test_an_undo_of_a_file_changed_since_shows_one_line_and_touches_nothing(
    client, store, todo_notes_workspace, edited
) -> None:
    form = confirmation(client, edited)
    # The person edits the file between reading the confirmation and confirming it.
    (todo_notes_workspace / "todo.txt").write_bytes(EDITED + b"- mine\n")
    refused = client.post(f"/tasks/{edited}/undo", data=form)
    assert refused.status_code == 409
    assert problem(refused) == "todo.txt was changed after the task changed it; nothing was undone"
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED + b"- mine\n"
    assert (todo_notes_workspace / "notes.txt").read_bytes() == NOTES + b"Plants watered.\n"
    assert restores(store, edited) == []
    # Asked again, the page says so before anything is confirmed.
    asked = client.get(f"/tasks/{edited}/undo")
    assert asked.status_code == 409 and "nothing was undone" in problem(asked)
    assert 'name="confirm"' not in asked.text


def test_a_confirmation_holds_only_for_the_task_as_it_was_shown(client, store, todo_notes_workspace, edited) -> None:
    stale = confirmation(client, edited)
    assert confirm(client, edited).status_code == 303
    assert confirm(client, edited, "redo").status_code == 303
    # The undo confirmed before the undo and redo above: not carried out on what the task is now.
    refused = client.post(f"/tasks/{edited}/undo", data=stale)
    assert refused.status_code == 409
    assert "recorded something after the undo was shown; nothing was done" in problem(refused)
    assert (todo_notes_workspace / "todo.txt").read_bytes() == EDITED
    assert len(events(store, edited, RestoreStarted)) == 2


def test_undo_of_a_task_that_has_not_run_is_refused_in_one_line(client, store, todo_notes_workspace) -> None:
    task_id = submit(store, todo_notes_workspace, "Add a line to todo.txt", allowed_effects=("read", "write"))
    asked = client.get(f"/tasks/{task_id}/undo")
    assert asked.status_code == 409
    assert problem(asked) == f"task {task_id} is submitted; cancel it or let it finish before its changes are undone"
    assert client.get("/tasks/t-404/undo").status_code == 404


def test_the_approvals_page_shows_the_change_a_confirming_task_would_make(
    client, store, data_dir, todo_notes_workspace
) -> None:
    rt = scripted_runtime(store, data_dir, [
        call("read_file", path="todo.txt"), call("append_file", path="todo.txt", text=f"- {SCRIPT}"),
    ])
    task_id = submit(store, todo_notes_workspace, "Add a line to todo.txt", allowed_effects=("read", "write"),
                     confirm_changes=True)
    assert run(rt, task_id) == "awaiting_approval"
    page = client.get("/approvals").text
    assert "The change it would make" in page
    assert str(escape(f"+- {SCRIPT}")) in page and SCRIPT not in page

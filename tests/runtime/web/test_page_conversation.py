"""Talking to a task from its page over HTTP: a message is recorded once by the page's session and wakes
the scheduler, a conversation waiting for the user can be closed, and a refused or forged form writes nothing."""

from __future__ import annotations

import html
import re

import pytest

from runtime.harness.tasks import submit_task
from runtime.web import access
from runtime.web.app import create_app
from store import EventStore
from store.events import CLOSED, AnswerGiven, TaskPhase, TaskPhaseChanged, UserSaid
from tests.helpers.page import TestClient, login, nonce, submit

FOLLOW_UP = "And which weekday is that?"


def running(store: EventStore, workspace) -> str:
    task_id = submit(store, workspace)
    store.append(task_id, [TaskPhaseChanged(phase=TaskPhase.RUNNING)])
    return task_id


def waiting_for_user(store: EventStore, workspace) -> str:
    """A conversation that has answered and waits for the user's next message, as the agent loop leaves it."""
    task_id = f"t-{len(store.tasks()) + 1}"
    store.append(task_id, submit_task("When is the release?", workspace, conversation=True), actor="ann")
    store.append(task_id, [
        TaskPhaseChanged(phase=TaskPhase.RUNNING),
        AnswerGiven(answer="March 3", sources=()),
        TaskPhaseChanged(phase=TaskPhase.WAITING_FOR_USER, reason="answered"),
    ])
    return task_id


def session_csrf(client: TestClient, token: str) -> str:
    """The session's check value, for posting what a page opened earlier would still post."""
    return access.csrf_token(token, client.cookies[access.SESSION_COOKIE])


def form_csrf(page: str, action: str) -> str | None:
    """The check value of the form posting to `action`, or None when the page shows no such form."""
    found = re.search(rf'action="{re.escape(action)}".*?name="csrf" value="([^"]+)"', page, re.S)
    return found.group(1) if found else None


def send(client, task_id: str, text: str):
    csrf = form_csrf(client.get(f"/tasks/{task_id}").text, f"/tasks/{task_id}/say")
    assert csrf is not None, "the task page shows no message form"
    return client.post(f"/tasks/{task_id}/say", data={"csrf": csrf, "text": text})


def said(store: EventStore, task_id: str) -> list:
    return [r for r in store.read_stream(task_id) if isinstance(r.event, UserSaid)]


def last_phase(store: EventStore, task_id: str) -> TaskPhaseChanged:
    return [r.event for r in store.read_stream(task_id) if isinstance(r.event, TaskPhaseChanged)][-1]


def text_of(response) -> str:
    return html.unescape(response.text)


def test_a_message_sent_from_the_task_page_is_recorded_once_by_the_session_and_wakes_the_scheduler(
    store, token, workspace
) -> None:
    task_id = running(store, workspace)
    woken: list[bool] = []
    client = login(create_app(store, "test-model", token=token, decided=lambda: woken.append(True)), token)
    response = send(client, task_id, f"  {FOLLOW_UP}\n")
    assert response.status_code == 303 and response.headers["location"] == f"/tasks/{task_id}"
    [message] = said(store, task_id)
    assert message.event.text == FOLLOW_UP and message.actor == f"web:{nonce(client)}"
    assert woken == [True]
    # Taken in where a running task is: no phase change.
    assert last_phase(store, task_id).phase == TaskPhase.RUNNING
    # The timeline shows it as the user's turn, by the session that sent it.
    turn = re.search(r'<li class="entry entry-user".*?</li>', client.get(f"/tasks/{task_id}").text, re.S)
    assert turn and FOLLOW_UP in html.unescape(turn.group(0)) and f"web:{nonce(client)}" in turn.group(0)


def test_a_message_to_a_conversation_waiting_for_the_user_sets_it_running_again(app, store, token, workspace) -> None:
    task_id = waiting_for_user(store, workspace)
    client = login(app, token)
    assert send(client, task_id, FOLLOW_UP).status_code == 303
    assert [r.event.text for r in said(store, task_id)] == [FOLLOW_UP]
    assert last_phase(store, task_id).phase == TaskPhase.RUNNING
    # Running, it still takes messages but has nothing to close.
    page = client.get(f"/tasks/{task_id}").text
    assert form_csrf(page, f"/tasks/{task_id}/say") and form_csrf(page, f"/tasks/{task_id}/close") is None


@pytest.mark.parametrize("command", ["say", "close"])
def test_a_form_without_this_sessions_check_value_is_403_and_records_nothing(
    store, token, workspace, command
) -> None:
    task_id = waiting_for_user(store, workspace)
    woken: list[bool] = []
    app = create_app(store, "test-model", token=token, decided=lambda: woken.append(True))
    mallory, client = login(app, token), login(app, token)
    before = len(store.read_stream(task_id))
    form = {"text": FOLLOW_UP}
    others = form_csrf(mallory.get(f"/tasks/{task_id}").text, f"/tasks/{task_id}/{command}")
    for csrf in (None, others, "0" * 64, "\u00e9" * 64):
        posted = form if csrf is None else {**form, "csrf": csrf}
        response = client.post(f"/tasks/{task_id}/{command}", data=posted)
        assert response.status_code == 403, csrf
        assert "nothing was recorded" in text_of(response)
    own = form_csrf(client.get(f"/tasks/{task_id}").text, f"/tasks/{task_id}/{command}")
    assert client.post(f"/tasks/{task_id}/{command}", json={**form, "csrf": own}).status_code == 415
    assert len(store.read_stream(task_id)) == before and woken == []


def test_without_a_session_a_message_is_401_and_records_nothing(app, store, workspace) -> None:
    task_id = running(store, workspace)
    response = TestClient(app, follow_redirects=False).post(f"/tasks/{task_id}/say", data={"text": FOLLOW_UP})
    assert response.status_code == 401 and said(store, task_id) == []


def test_a_cancelled_task_shows_no_message_form_and_a_message_to_it_is_409_with_the_reason(
    store, token, workspace
) -> None:
    task_id = running(store, workspace)
    store.append(task_id, [TaskPhaseChanged(phase=TaskPhase.CANCELLED, reason="cancelled by the operator")])
    woken: list[bool] = []
    client = login(create_app(store, "test-model", token=token, decided=lambda: woken.append(True)), token)
    page = client.get(f"/tasks/{task_id}").text
    assert form_csrf(page, f"/tasks/{task_id}/say") is None and "Say something to this task" not in page
    before = len(store.read_stream(task_id))
    # A page opened before the task was cancelled still posts its form.
    response = client.post(f"/tasks/{task_id}/say", data={"csrf": session_csrf(client, token), "text": FOLLOW_UP})
    assert response.status_code == 409
    assert f"task {task_id} is cancelled (cancelled by the operator); a message can only go to a task" in text_of(
        response
    )
    assert len(store.read_stream(task_id)) == before and woken == []


def test_an_empty_message_is_409_with_the_reason_and_records_nothing(app, store, token, workspace) -> None:
    task_id = running(store, workspace)
    client = login(app, token)
    response = send(client, task_id, "  \n ")
    assert response.status_code == 409 and "a message needs text" in text_of(response)
    assert said(store, task_id) == []


def test_a_message_to_an_unknown_task_is_404(app, token) -> None:
    client = login(app, token)
    response = client.post("/tasks/t-nope/say", data={"csrf": session_csrf(client, token), "text": FOLLOW_UP})
    assert response.status_code == 404 and "t-nope" in text_of(response)


def test_closing_on_the_page_ends_a_conversation_waiting_for_the_user(app, store, token, workspace) -> None:
    task_id = waiting_for_user(store, workspace)
    client = login(app, token)
    page = client.get(f"/tasks/{task_id}").text
    assert "Close conversation" in page
    csrf = form_csrf(page, f"/tasks/{task_id}/close")
    response = client.post(f"/tasks/{task_id}/close", data={"csrf": csrf})
    assert response.status_code == 303 and response.headers["location"] == f"/tasks/{task_id}"
    closed = [r for r in store.read_stream(task_id) if isinstance(r.event, TaskPhaseChanged)][-1]
    assert (closed.event.phase, closed.event.reason, closed.actor) == (
        TaskPhase.COMPLETED, CLOSED, f"web:{nonce(client)}"
    )
    # A closed conversation takes no more messages, so its page offers neither form.
    page = client.get(f"/tasks/{task_id}").text
    assert form_csrf(page, f"/tasks/{task_id}/say") is None and "Close conversation" not in page


def test_closing_a_task_that_is_not_waiting_for_the_user_is_409_and_records_nothing(
    app, store, token, workspace
) -> None:
    task_id = running(store, workspace)
    client = login(app, token)
    page = client.get(f"/tasks/{task_id}").text
    assert "Close conversation" not in page
    before = len(store.read_stream(task_id))
    response = client.post(f"/tasks/{task_id}/close", data={"csrf": session_csrf(client, token)})
    assert response.status_code == 409 and "not waiting for the user" in text_of(response)
    assert len(store.read_stream(task_id)) == before


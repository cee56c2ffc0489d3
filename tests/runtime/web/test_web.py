"""The web page over HTTP on a real store: access, approvals decided once, escaping, the views, the live stream."""

from __future__ import annotations

import html
import json
import re
import threading
import time
from datetime import timedelta

import httpx
import pytest

from notifications import queue
from runtime.agent.loop import arguments_hash
from runtime.agent.plugins import load
from runtime.agent.progress import Board, Progress
from runtime.web import access
from runtime.web.app import CSP, create_app
from store import EventStore
from store.events import (
    NOTIFICATIONS_STREAM,
    AdmittedNotification,
    AnswerGiven,
    ApprovalDenied,
    ApprovalGranted,
    ArtifactRead,
    ArtifactWritten,
    CatalogEntry,
    ContextTrimmed,
    JobFinished,
    JobStarted,
    ModelCalled,
    NotificationEnqueued,
    NotificationsAdmitted,
    ProposalRejected,
    RunInterrupted,
    SkillActivated,
    SkillCatalogPinned,
    TaskPhase,
    TaskPhaseChanged,
    TestsRan,
    ToolCallExecuted,
    ToolCallStarted,
)
from tests.helpers.page import (
    BREAKOUT,
    HOSTILE,
    SCRIPT,
    TestClient,
    csrf_of,
    decide,
    login,
    manifest,
    nonce,
    propose,
    serve,
    status_of,
    submit,
)

RAW = ("<script>alert(1)", "<img src=x")


# -- talking to the page ------------------------------------------------------------------------


def decisions(store: EventStore, task_id: str) -> list:
    return [r for r in store.read_stream(task_id) if isinstance(r.event, (ApprovalGranted, ApprovalDenied))]


def assert_nothing_raw(response: httpx.Response) -> None:
    for raw in RAW:
        assert raw not in response.text, f"{response.request.url} shows unescaped {raw!r}"


def pages(task_id: str) -> list[str]:
    return ["/", "/approvals", "/tasks", f"/tasks/{task_id}", f"/tasks/{task_id}/calls/1", "/events",
            f"/events?task={task_id}", "/events?type=ToolCallProposed"]


# -- access --------------------------------------------------------------------------------------


def test_without_a_session_every_route_is_401_and_shows_no_data(app, store, waiting) -> None:
    task_id, approval_id = waiting
    client = TestClient(app, follow_redirects=False)
    for path in [*pages(task_id), "/stream"]:
        response = client.get(path)
        assert response.status_code == 401, path
        assert "?token=" in response.text
        for secret in (task_id, approval_id, "Tidy up", "echo", "shell", "pending-count"):
            assert secret not in response.text, (path, secret)
    posted = client.post(f"/approvals/{approval_id}", data={"decision": "approve", "csrf": "x", "arguments_hash": "y"})
    assert posted.status_code == 401 and approval_id not in posted.text
    assert status_of(store, approval_id) == "pending"


def test_a_forged_cookie_is_not_a_session(app, waiting) -> None:
    client = TestClient(app, follow_redirects=False)
    for forged in ("made-up.0123abcd", "caf\u00e9.\u00e9t\u00e9", "no-dot"):
        cookie = f"{access.SESSION_COOKIE}={forged}".encode("latin-1")
        assert client.get("/approvals", headers={"cookie": cookie}).status_code == 401, forged


def test_a_wrong_token_is_401_and_sets_no_cookie(app, token) -> None:
    client = TestClient(app, follow_redirects=False)
    response = client.get("/?token=" + "x" * len(token))
    assert response.status_code == 401
    assert "set-cookie" not in response.headers
    assert client.get("/").status_code == 401


def test_the_right_token_sets_a_strict_cookie_and_redirects_to_the_address_without_it(app, token, waiting) -> None:
    task_id, _ = waiting
    client = TestClient(app, follow_redirects=False)
    response = client.get(f"/events?task={task_id}&token={token}")
    assert response.status_code == 303
    assert response.headers["location"] == f"/events?task={task_id}"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{access.SESSION_COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict") and "Path=/" in cookie
    for path in pages(task_id):
        assert client.get(path).status_code == 200, path


def test_logging_in_again_keeps_the_session_so_open_forms_stay_valid(app, token) -> None:
    client = login(app, token)
    first = client.cookies[access.SESSION_COOKIE]
    client.get(f"/tasks?token={token}")
    assert client.cookies[access.SESSION_COOKIE] == first


def test_a_doubled_slash_cannot_turn_the_login_redirect_into_another_site(app, token) -> None:
    response = TestClient(app, follow_redirects=False).get(f"//evil.example/?token={token}")
    assert not response.headers.get("location", "/").startswith("//")


def test_health_and_static_files_need_no_session(app) -> None:
    client = TestClient(app)
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    script = client.get("/static/live.js")
    assert script.status_code == 200 and "EventSource" in script.text
    assert script.headers["x-content-type-options"] == "nosniff"
    assert client.get("/static/page.css").status_code == 200


def test_every_html_response_carries_the_strict_policy_and_security_headers(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    anonymous = TestClient(app, follow_redirects=False)
    client = login(app, token)
    responses = [anonymous.get("/"), anonymous.get("/?token=wrong-token-value")]
    responses += [client.get(path) for path in pages(task_id)]
    responses += [client.get("/tasks/t-nope"), client.post(f"/approvals/{approval_id}", data={"decision": "approve"})]
    responses += [decide(client, "ap-nope", "approve")]
    for response in responses:
        assert response.headers["content-type"].startswith("text/html"), response.request.url
        assert response.headers["content-security-policy"] == CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["cache-control"] == "no-store"
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP and "frame-ancestors 'none'" in CSP
    for response in responses:
        assert "<style" not in response.text and "style=" not in response.text and "<script>" not in response.text


# -- deciding ------------------------------------------------------------------------------------


def test_a_post_without_the_csrf_field_is_403_and_the_approval_stays_pending(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    client = login(app, token)
    shown = arguments_hash(HOSTILE)
    response = client.post(f"/approvals/{approval_id}", data={"decision": "approve", "arguments_hash": shown})
    assert response.status_code == 403
    assert status_of(store, approval_id) == "pending" and decisions(store, task_id) == []


def test_a_post_with_another_sessions_csrf_is_403(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    mallory, client = login(app, token), login(app, token)
    form = {"decision": "approve", "arguments_hash": arguments_hash(HOSTILE), "csrf": csrf_of(mallory)}
    assert client.post(f"/approvals/{approval_id}", data=form).status_code == 403
    assert client.post(f"/approvals/{approval_id}", data={**form, "csrf": "0" * 64}).status_code == 403
    assert client.post(f"/approvals/{approval_id}", data={**form, "csrf": "\u00e9" * 64}).status_code == 403
    assert decisions(store, task_id) == []


def test_a_decision_that_is_not_a_form_post_is_refused(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    client = login(app, token)
    form = {"decision": "approve", "arguments_hash": arguments_hash(HOSTILE), "csrf": csrf_of(client)}
    response = client.post(f"/approvals/{approval_id}", json=form)
    assert response.status_code == 415
    assert decisions(store, task_id) == []


def test_a_decision_made_on_the_page_wakes_the_scheduler_and_a_refused_one_does_not(
    store, token, waiting
) -> None:
    _, approval_id = waiting
    woken: list[bool] = []
    client = login(create_app(store, "test-model", token=token, decided=lambda: woken.append(True)), token)
    assert decide(client, approval_id, "approve", arguments_hash="0" * 64).status_code == 409
    assert woken == []
    assert decide(client, approval_id, "approve").status_code == 303
    assert woken == [True]


def test_approving_records_the_grant_by_the_web_session_and_tells_the_task(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    client = login(app, token)
    response = decide(client, approval_id, "approve")
    assert response.status_code == 303
    assert response.headers["location"] == f"/approvals?done={approval_id}"
    [granted] = decisions(store, task_id)
    assert isinstance(granted.event, ApprovalGranted)
    assert granted.event.by == f"web:{nonce(client)}" and granted.actor == granted.event.by
    told = [r.event for r in store.read_stream(NOTIFICATIONS_STREAM) if isinstance(r.event, NotificationEnqueued)]
    assert [(n.kind, n.tasks) for n in told] == [("approval_granted", (task_id,))]
    page = client.get(response.headers["location"])
    assert f"{approval_id} (shell) was granted by web:{nonce(client)}" in page.text
    assert f'id="{approval_id}"' not in page.text, "no longer pending"
    assert 'id="pending-count">0<' in page.text


def test_denying_records_the_reason_given(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    client = login(app, token)
    response = decide(client, approval_id, "deny", reason=f"not now {SCRIPT}")
    assert response.status_code == 303
    [denied] = decisions(store, task_id)
    assert isinstance(denied.event, ApprovalDenied) and denied.event.reason == f"not now {SCRIPT}"
    for path in pages(task_id):
        assert_nothing_raw(client.get(path))


def test_a_second_decision_is_409_naming_who_decided_first_and_the_log_keeps_one(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    ann, bob = login(app, token), login(app, token)
    # Both look at the approval before Ann decides it.
    forms = {c: {"csrf": csrf_of(c), "arguments_hash": arguments_hash(HOSTILE)} for c in (ann, bob)}
    assert decide(ann, approval_id, "approve").status_code == 303
    late = bob.post(f"/approvals/{approval_id}", data={**forms[bob], "decision": "deny"})
    assert late.status_code == 409
    assert f"already granted by web:{nonce(ann)}" in late.text
    assert 'href="/approvals"' in late.text
    again = ann.post(f"/approvals/{approval_id}", data={**forms[ann], "decision": "approve"})
    assert again.status_code == 409 and "already granted" in again.text
    assert len(decisions(store, task_id)) == 1


def test_two_decisions_at_the_same_moment_record_exactly_one(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    clients = [login(app, token), login(app, token)]
    forms = [
        {"csrf": csrf_of(c), "arguments_hash": arguments_hash(HOSTILE), "decision": d}
        for c, d in zip(clients, ("approve", "deny"), strict=True)
    ]
    start = threading.Barrier(2)
    statuses: list[int] = []

    def post(client: TestClient, form: dict) -> None:
        start.wait()
        statuses.append(client.post(f"/approvals/{approval_id}", data=form).status_code)

    threads = [threading.Thread(target=post, args=pair) for pair in zip(clients, forms, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(statuses) == [303, 409]
    assert len(decisions(store, task_id)) == 1
    told = [r for r in store.read_stream(NOTIFICATIONS_STREAM)]
    assert len(told) == 1, "only the decision that counted tells the task"


def test_an_expired_approval_is_409_and_says_so(app, store, token, workspace) -> None:
    task_id = submit(store, workspace)
    approval_id = propose(store, task_id, {"command": "make clean"}, expires_in=timedelta(seconds=-5))
    client = login(app, token)
    assert "expired" in client.get("/approvals").text
    response = decide(client, approval_id, "approve")
    assert response.status_code == 409 and "expired" in response.text
    assert decisions(store, task_id) == []


def test_a_decision_on_other_arguments_than_the_ones_shown_is_409_and_records_nothing(
    app, store, token, waiting
) -> None:
    task_id, approval_id = waiting
    client = login(app, token)
    stale = arguments_hash({**HOSTILE, "command": "rm -rf /"})
    form = {"csrf": csrf_of(client), "arguments_hash": stale, "decision": "approve"}
    response = client.post(f"/approvals/{approval_id}", data=form)
    assert response.status_code == 409 and "other arguments" in response.text
    assert decisions(store, task_id) == [] and status_of(store, approval_id) == "pending"


def test_an_unknown_approval_is_404(app, token, waiting) -> None:
    client = login(app, token)
    form = {"csrf": csrf_of(client), "arguments_hash": "0" * 64, "decision": "approve"}
    response = client.post("/approvals/ap-nope", data=form)
    assert response.status_code == 404 and "ap-nope" in response.text


def test_a_decision_other_than_approve_or_deny_is_400(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    client = login(app, token)
    assert decide(client, approval_id, "maybe").status_code == 400
    assert decisions(store, task_id) == []


# -- what the pages show -------------------------------------------------------------------------


def test_a_pending_approval_shows_its_exact_arguments_contract_policy_expiry_and_context(
    app, store, token, waiting
) -> None:
    task_id, approval_id = waiting
    client = login(app, token)
    response = client.get("/")
    page = response.text
    article = re.search(rf'<article class="approval" id="{approval_id}">(.*?)</article>', page, re.S).group(1)
    shown = re.search(r'<pre class="arguments">(.*?)</pre>', article, re.S).group(1)
    assert json.loads(html.unescape(shown)) == HOSTILE
    assert html.escape(SCRIPT, quote=False) in article
    assert f'href="/tasks/{task_id}"' in article and html.escape(f"Tidy up {SCRIPT}", quote=False) in article
    for fact in ("external", "no: it is never run twice", "workspace", "workspace@7", "UTC", "in 29 min"):
        assert fact in article, fact
    assert f'href="/tasks/{task_id}/calls/1"' in article
    assert 'name="decision" value="approve"' in article and 'name="decision" value="deny"' in article
    assert '<input name="reason"' in article
    assert article.count(f'name="arguments_hash" value="{arguments_hash(HOSTILE)}"') == 2
    assert_nothing_raw(response)


def test_approvals_are_listed_oldest_first_and_an_unknown_tool_says_so(app, store, token, workspace) -> None:
    first = propose(store, submit(store, workspace), {"command": "ls"})
    second = propose(store, submit(store, workspace), {"x": 1}, tool="launch_rocket")
    page = login(app, token).get("/approvals").text
    assert page.index(f'id="{first}"') < page.index(f'id="{second}"')
    assert "unknown tool" in page.split(f'id="{second}"')[1]


def test_recently_decided_shows_who_decided_what(app, store, token, workspace) -> None:
    task_id = submit(store, workspace)
    approval_id = propose(store, task_id, {"command": "ls"})
    store.append(task_id, [ApprovalDenied(approval_id=approval_id, by="ann", reason=f"no {BREAKOUT}")])
    response = login(app, token).get("/approvals")
    recent = response.text.split("Recently decided")[1]
    assert approval_id in recent and "denied" in recent and "ann" in recent and "just now" in recent
    assert_nothing_raw(response)


def test_the_tasks_page_lists_newest_first_with_phase_steps_and_age(app, store, token, workspace) -> None:
    older = submit(store, workspace, goal="first goal")
    newer = submit(store, workspace, goal=f"second goal {SCRIPT}")
    propose(store, newer, {"command": "ls"})
    response = login(app, token).get("/tasks")
    page = response.text
    assert page.index(f'href="/tasks/{newer}"') < page.index(f'href="/tasks/{older}"')
    row = page.split(f'href="/tasks/{newer}"')[1].split("</tr>")[0]
    assert "awaiting_approval" in row and "<td>1</td>" in row and "just now" in row
    assert_nothing_raw(response)


def test_the_task_page_shows_summary_timeline_artifacts_and_model_calls(app, store, token, waiting) -> None:
    task_id, approval_id = waiting
    long_output = "x" * 10_000
    note = queue.new_notification(
        source="file_watcher", kind="file_modified", tasks=[task_id], text=f"notes.txt changed {BREAKOUT}"
    )
    queue.enqueue(store, note)
    store.append(task_id, [
        ApprovalGranted(approval_id=approval_id, by="web:abcd1234"),
        ToolCallStarted(call_id="c1", tool="shell", idempotent=False),
        ToolCallExecuted(call_id="c1", tool="shell", status="ok", observation={"stdout": long_output, "html": SCRIPT}),
        NotificationsAdmitted(call_index=2, items=(AdmittedNotification(
            notification_id=note.notification_id, source=note.source, kind=note.kind, text=note.text),)),
        SkillCatalogPinned(entries=(CatalogEntry(name="runbook", description="d", content_hash="9" * 64, folder="f"),),
                           fingerprint="fp", budget_tokens=400),
        SkillActivated(call_index=2, name="runbook", content_hash="9" * 64, folder="f", body="do it"),
        ProposalRejected(call_index=2, attempt=1, error="unknown tool 'rm'"),
        ContextTrimmed(call_index=2, elided=3, dropped=1, tokens_before=9000, tokens_after=4800, budget=7800),
        ModelCalled(call_index=2, attempt=2, model="test-model", manifest=manifest(), prompt_tokens=300,
                    completion_tokens=20, cached_tokens=260),
        ArtifactRead(path="notes.txt", sha256="1" * 64, size=42),
        ArtifactWritten(path="out/report.md", sha256="2" * 64, size=1234),
        TestsRan(command="pytest", status="passed", paths=("out/report.md",)),
        JobStarted(job_id="j-1", call_id="c2", command="make"),
        JobFinished(job_id="j-1", exit_code=0),
        RunInterrupted(reason="agentd stopped"),
        AnswerGiven(answer="The folder is clean."),
        TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason="answered"),
    ])
    response = login(app, token).get(f"/tasks/{task_id}")
    page = response.text
    assert re.search(r'class="phase[^"]*">completed<', page)
    assert page.count('class="phase') == 1
    for text in (
        "Tidy up", "default", "2 of 40", "decision 1 (next_step), attempt 1", "200 reused from the cache",
        "shell proposed (c1)", f"approval {approval_id} requested", "granted by web:abcd1234",
        "shell started (c1, not idempotent)", "shell ok (c1", "cut: the first 4,000 of",
        "1 notification(s) admitted into call 2", "file_watcher/file_modified", "1 skill(s)",
        "skill runbook activated", "rejected (attempt 1)", "unknown tool &#39;rm&#39;", "job j-1 started",
        "exit code 0", "run interrupted", "The folder is clean.", "phase: completed",
        "history cut for call 2: 3 result(s) elided, 1 step(s) dropped", "9000 tokens before, 4800 after, budget 7800",
        "out/report.md", "222222222222", "1234", "passed",
    ):
        assert text in page, text
    calls = page.split("Model calls")[1]
    assert "<td>140</td><td>80</td><td>0</td>" in calls and "<td>260</td>" in calls
    assert f'href="/tasks/{task_id}/calls/2?attempt=2"' in calls
    assert_nothing_raw(response)


def test_an_unknown_task_is_404(app, token) -> None:
    client = login(app, token)
    assert client.get("/tasks/t-nope").status_code == 404
    assert client.get("/tasks/t-nope/calls/1").status_code == 404


def test_the_manifest_page_shows_buckets_items_in_prompt_order_and_what_was_left_out(
    app, store, token, waiting
) -> None:
    task_id, _ = waiting
    store.append(task_id, [ModelCalled(call_index=1, attempt=2, model="test-model", manifest=manifest("retry"),
                                       prompt_tokens=260, completion_tokens=10)])
    client = login(app, token)
    page = client.get(f"/tasks/{task_id}/calls/1").text
    assert "retry (attempt 2)" in page, "the last attempt by default"
    assert "<td>140</td><td>80</td><td>0</td>\n    <td>40</td><td>260</td>" in page
    assert page.index("<code>role</code>") < page.index("<code>tool:shell</code>") < page.index("<code>goal</code>")
    for text in ("profile:workspace", "untrusted", "aaaaaaaaaaaa", "window 4096", "3552", "notes/old.md",
                 "over the evidence budget", "sha256:" + "e" * 64):
        assert text in page, text
    first = client.get(f"/tasks/{task_id}/calls/1?attempt=1").text
    assert "next_step (attempt 1)" in first
    assert client.get(f"/tasks/{task_id}/calls/1?attempt=3").status_code == 404
    assert client.get(f"/tasks/{task_id}/calls/9").status_code == 404
    assert client.get(f"/tasks/{task_id}/calls/1?attempt=x").status_code == 400


def test_the_events_page_is_newest_first_pages_with_before_and_filters(app, store, token, workspace) -> None:
    tasks = [submit(store, workspace) for _ in range(2)]
    for n in range(30):
        store.append(tasks[n % 2], [TaskPhaseChanged(phase=TaskPhase.RUNNING, reason=f"step {n} {SCRIPT}")])
    client = login(app, token)

    def seqs(response: httpx.Response) -> list[int]:
        assert_nothing_raw(response)
        return [int(s) for s in re.findall(r'<tr id="seq-(\d+)">', response.text)]

    last = store.last_seq()
    first_page = client.get("/events?limit=10")
    assert seqs(first_page) == list(range(last, last - 10, -1))
    older = html.unescape(re.search(r'<a rel="next" href="([^"]+)"', first_page.text).group(1))
    assert f"before={last - 9}" in older
    assert seqs(client.get(older)) == list(range(last - 10, last - 20, -1))
    assert seqs(client.get(f"/events?limit=10&before={last - 29}")) == [2, 1]
    assert 'rel="next"' not in client.get(f"/events?limit=10&before={last - 29}").text
    assert seqs(client.get(f"/events?task={tasks[0]}")) == [r.seq for r in store.read_stream(tasks[0])][::-1]
    typed = client.get("/events?type=TaskSubmitted")
    assert seqs(typed) == [2, 1] and "<option selected>TaskSubmitted</option>" in typed.text
    assert client.get("/events?before=abc").status_code == 400


def test_the_events_page_of_a_ten_thousand_event_log_shows_one_page_and_a_link_to_older(
    app, store, token, workspace
) -> None:
    """How fast is bench/page_bench.py's to report; here, that a big log is paged, not dumped."""
    task_id = submit(store, workspace)
    for _ in range(10):
        store.append(task_id, [TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="r" * 200)] * 1_000)
    client = login(app, token)
    response = client.get("/events")
    filtered = client.get("/events?type=TaskSubmitted")
    assert response.text.count('<tr id="seq-') == 50 and 'rel="next"' in response.text
    assert filtered.text.count('<tr id="seq-') == 1


def test_a_long_payload_is_cut_with_a_note(app, store, token, workspace) -> None:
    task_id = submit(store, workspace)
    store.append(task_id, [TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="y" * 5_000)])
    page = login(app, token).get("/events?limit=1").text
    assert "cut: the first 2,000 of" in page and "y" * 5_000 not in page


# -- the live stream, on a real server -----------------------------------------------------------


@pytest.fixture
def served(store: EventStore, token: str):
    with serve(store, token) as parts:
        yield parts


def events_of(lines) -> tuple[str, str]:
    """The next (event, data) of a server-sent event stream."""
    name = data = None
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and name:
            return name, data
    raise AssertionError("the stream ended")


def wait_until(condition, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_stream_sends_changed_after_an_append(served, store, workspace) -> None:
    app, _, _, client = served
    with client.stream("GET", "/stream") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.iter_lines()
        assert events_of(lines) == ("changed", str(store.last_seq()))
        assert app.state.open_streams == 1
        submit(store, workspace)
        assert events_of(lines) == ("changed", str(store.last_seq()))
    assert wait_until(lambda: app.state.open_streams == 0), "closing the stream did not free it"


def test_the_stream_needs_a_session(served) -> None:
    _, _, _, client = served
    client.cookies.clear()
    assert client.get("/stream").status_code == 401


def test_a_server_shutdown_ends_open_streams_promptly(served) -> None:
    app, server, thread, client = served
    with client.stream("GET", "/stream") as response:
        lines = response.iter_lines()
        events_of(lines)
        assert app.state.open_streams == 1
        server.should_exit = True
        thread.join(timeout=3)
        assert not thread.is_alive(), "uvicorn waited for the open stream"
    assert app.state.open_streams == 0


# -- what a task is doing now ---------------------------------------------------------------------


def now_of(page: str) -> str | None:
    """The text of the task page's Now line, or None if it has none."""
    found = re.search(r'<dd class="now"[^>]*>\s*<span class="now-line">([^<]*)</span>', page)
    return html.unescape(found.group(1)) if found else None


def test_a_running_tasks_page_says_what_it_is_doing_now_in_the_html_served(store, token, workspace) -> None:
    board = Board()
    client = login(create_app(store, "test-model", token=token, tools=load([]).tools, board=board), token)
    task_id = submit(store, workspace)
    assert now_of(client.get(f"/tasks/{task_id}").text) == "waiting to start"
    store.append(task_id, [TaskPhaseChanged(phase=TaskPhase.RUNNING, reason="started")])
    board(Progress(task_id, 3, "evaluating", 1840, 2400))
    page = client.get(f"/tasks/{task_id}").text
    assert now_of(page) == "step 3: evaluating 1,840 of 2,400 prompt tokens"
    assert '<progress class="now-bar" max="2400" value="1840">' in page
    board(Progress(task_id, 3, "running_tool", detail="shell"))
    page = client.get(f"/tasks/{task_id}").text
    assert now_of(page) == "step 3: running shell" and '<progress class="now-bar" max="1" value="0" hidden>' in page
    board(Progress(task_id, 3, "decided", detail="called shell -> ok"))
    assert now_of(client.get(f"/tasks/{task_id}").text) == "between decisions"
    store.append(task_id, [TaskPhaseChanged(phase=TaskPhase.COMPLETED, reason="answered")])
    board(Progress(task_id, 4, "deciding"))  # a report that comes late says nothing about a finished task
    page = client.get(f"/tasks/{task_id}").text
    assert now_of(page) is None and 'id="now"' not in page


def test_without_a_board_the_task_page_claims_nothing_about_now(app, store, token, workspace) -> None:
    task_id = submit(store, workspace)
    page = login(app, token).get(f"/tasks/{task_id}").text
    assert now_of(page) is None and 'id="now"' not in page


def test_the_stream_sends_each_change_of_the_board_as_a_progress_event(store, token, workspace) -> None:
    board = Board()
    task_id = submit(store, workspace)
    with serve(store, token, board) as (_, _, _, client):
        with client.stream("GET", "/stream") as response:
            lines = response.iter_lines()
            assert events_of(lines) == ("changed", str(store.last_seq()))
            assert events_of(lines) == ("progress", "{}")
            board(Progress(task_id, 2, "generating", 37, 256))
            name, data = events_of(lines)
            assert name == "progress" and json.loads(data) == {
                task_id: {"line": "step 2: generating 37 of at most 256 tokens", "stage": "generating", "step": 2,
                          "done": 37, "total": 256, "bar": True}
            }
            board(Progress(task_id, 2, "decided", detail="answered"))
            assert events_of(lines) == ("progress", "{}")


def test_where_several_workers_serve_the_tasks_page_names_the_worker_running_each(app, store, token, workspace) -> None:
    held, free = submit(store, workspace, goal="held"), submit(store, workspace, goal="free")
    alone = login(app, token).get("/tasks").text
    assert "<th>Worker</th>" not in alone, "one agentd serves: nothing to say"
    store.workers.register("host-a:11:aaaaaa", "host-a", 11)
    store.workers.register("host-b:22:bbbbbb", "host-b", 22)
    assert store.workers.claim(held, "host-b:22:bbbbbb", ttl_s=300)
    response = login(app, token).get("/tasks")
    page = response.text
    assert "<th>Worker</th>" in page
    assert "<code>host-b:22:bbbbbb</code>" in page.split(f'href="/tasks/{held}"')[1].split("</tr>")[0]
    assert "<td>-</td>" in page.split(f'href="/tasks/{free}"')[1].split("</tr>")[0]
    assert_nothing_raw(response)


def test_a_stream_asked_for_while_agentd_stops_is_refused_so_the_browser_does_not_retry(store, token) -> None:
    # An EventSource retries a stream that ended, but not one refused: retries fit a stop held in CI.
    client = login(create_app(store, "test-model", token=token, tools=load([]).tools, stopping=lambda: True), token)
    response = client.get("/stream")
    assert response.status_code == 503 and response.headers["connection"] == "close"


def test_each_stream_closes_its_connection_when_it_ends(served) -> None:
    # A retry then needs a new connection, which a stopping server no longer takes.
    _, _, _, client = served
    with client.stream("GET", "/stream") as response:
        assert response.status_code == 200 and response.headers["connection"] == "close"

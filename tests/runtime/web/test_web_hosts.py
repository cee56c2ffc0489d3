"""The page against DNS rebinding: it answers only to its own host names, takes forms only from its own
origin, and tells a caller without a session nothing about tasks, the process or the model."""

from __future__ import annotations

import json
import urllib.request

import httpx
import pytest

from runtime.agent.plugins import load
from runtime.web.app import create_app
from store import EventStore
from tests.helpers.page import TestClient, decide, login, serve, status_of

REBOUND = "evil.example"
MODEL_URL = "http://10.0.0.7:8080/v1/completions"


def status() -> dict:
    """What the daemon adds to /healthz: running task ids, the pid, the model's state."""
    return {
        "running_tasks": ["t-secret-1"],
        "deciding": {"t-secret-1": "deciding"},
        "model_state": {"url": MODEL_URL, "path": "/home/ann/models/qwen.gguf"},
        "pid": 4242,
    }


@pytest.fixture
def app(store: EventStore, token: str):
    return create_app(store, MODEL_URL, status, token=token, tools=load([]).tools, host="agentd.lan")


def on(host: str) -> dict[str, str]:
    return {"host": host}


def test_a_rebound_host_name_gets_no_health_details_and_no_session(app, token) -> None:
    client = TestClient(app, follow_redirects=False)
    health = client.get("/healthz", headers=on(REBOUND))
    assert health.status_code == 421
    for secret in ("t-secret-1", "4242", MODEL_URL, "/home/ann"):
        assert secret not in health.text
    login = client.get(f"/?token={token}", headers=on(f"{REBOUND}:8765"))
    assert login.status_code == 421
    assert "set-cookie" not in login.headers and not client.cookies


@pytest.mark.parametrize("host", ["localhost:8765", "127.0.0.1:8765", "[::1]:8765", "127.0.0.1", "agentd.lan:8765"])
def test_loopback_names_and_the_configured_host_are_served(app, token, host: str) -> None:
    client = TestClient(app, follow_redirects=False)
    assert client.get("/healthz", headers=on(host)).status_code == 200
    assert client.get(f"/?token={token}", headers=on(host)).status_code == 303


@pytest.mark.parametrize(
    "host", ["", "evil.example:8765", "localhost.evil.example", "127.0.0.1.nip.io", "agentd.lan.evil"]
)
def test_any_other_host_header_is_refused(app, host: str) -> None:
    assert TestClient(app).get("/static/page.css", headers=on(host)).status_code == 421


def test_health_without_a_session_shows_no_task_ids_pid_or_model_and_with_one_shows_all(app, token) -> None:
    anonymous = TestClient(app).get("/healthz", headers=on("127.0.0.1:8765"))
    assert anonymous.status_code == 200
    body = anonymous.json()
    assert body["status"] == "ok"
    for secret in ("t-secret-1", "4242", MODEL_URL, "/home/ann"):
        assert secret not in anonymous.text
    full = login(app, token).get("/healthz").json()
    assert full["running_tasks"] == ["t-secret-1"] and full["pid"] == 4242 and full["model"] == MODEL_URL


def test_health_with_the_page_token_as_a_bearer_shows_all(app, token) -> None:
    """What a command on this machine (`agentd status`) can read: it holds the token file, a rebinding page does not."""
    client = TestClient(app)
    full = client.get("/healthz", headers={"authorization": f"Bearer {token}"}).json()
    assert full["running_tasks"] == ["t-secret-1"]
    wrong = client.get("/healthz", headers={"authorization": "Bearer not-the-token-at-all"}).json()
    assert "running_tasks" not in wrong


@pytest.mark.parametrize("origin", [f"http://{REBOUND}", f"http://{REBOUND}:8765", "null", "http://127.0.0.1:9999"])
def test_a_decision_posted_from_another_origin_is_refused_and_records_nothing(
    app, store, token, waiting, origin: str,
) -> None:
    _, approval_id = waiting
    client = login(app, token)
    client.headers["origin"] = origin
    response = decide(client, approval_id, "approve")
    assert response.status_code == 403
    assert status_of(store, approval_id) == "pending"


def test_a_cross_site_fetch_without_origin_is_refused(app, store, token, waiting) -> None:
    _, approval_id = waiting
    client = login(app, token)
    client.headers["sec-fetch-site"] = "cross-site"
    assert decide(client, approval_id, "approve").status_code == 403
    assert status_of(store, approval_id) == "pending"


def test_a_decision_from_the_pages_own_origin_is_recorded(app, store, token, waiting) -> None:
    _, approval_id = waiting
    client = login(app, token)
    client.headers.update({"origin": "http://testserver", "sec-fetch-site": "same-origin"})
    response = decide(client, approval_id, "approve")
    assert response.status_code == 303
    assert status_of(store, approval_id) == "granted"


def test_a_served_page_refuses_a_rebound_host_and_still_answers_the_start_health_check(store, token) -> None:
    """Under uvicorn, as `agentd start` asks it: a plain GET of /healthz at the printed address answers JSON."""
    with serve(store, token) as (_, server, _, client):
        port = server.servers[0].sockets[0].getsockname()[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200 and json.loads(response.read())["status"] == "ok"
        rebound = httpx.get(f"http://127.0.0.1:{port}/healthz", headers=on(f"{REBOUND}:{port}"), timeout=5)
        assert rebound.status_code == 421
        stolen = httpx.get(f"http://127.0.0.1:{port}/?token={token}", headers=on(f"{REBOUND}:{port}"), timeout=5)
        assert stolen.status_code == 421 and "set-cookie" not in stolen.headers


def test_the_pages_own_form_posting_origin_null_under_its_no_referrer_policy_is_recorded(
    app, store, token, waiting
) -> None:
    """Chromium sends `Origin: null` on a same-origin form POST when the page's Referrer-Policy is
    no-referrer (as agentd's is); Sec-Fetch-Site then says where the form came from."""
    _, approval_id = waiting
    client = login(app, token)
    client.headers.update({"origin": "null", "sec-fetch-site": "cross-site"})
    assert decide(client, approval_id, "approve").status_code == 403
    client.headers.update({"sec-fetch-site": "same-origin"})
    assert decide(client, approval_id, "approve").status_code == 303
    assert status_of(store, approval_id) == "granted"

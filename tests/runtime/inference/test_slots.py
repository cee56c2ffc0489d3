"""A task's calls to a shared llama.cpp server go to one slot, the same from every worker, so the slot
keeps its prefix. Against the scripted endpoint, which answers /props as llama-server does and keeps
what each request asked for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.inference.http import HttpModel, slot_of
from runtime.inference.model_file import smoke_model_path
from tests.helpers import REPO, free_port, wait_for_port


def _endpoint(tmp_path: Path, slots: int):
    requests = tmp_path / f"requests-{slots}.jsonl"
    script = tmp_path / f"script-{slots}.json"
    script.write_text(json.dumps({"delay_s": 0, "slots": slots, "requests": str(requests), "replies": ["ok"]}))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tests.helpers.model_server", str(port), str(script)], cwd=REPO)
    wait_for_port(port)
    return server, f"http://127.0.0.1:{port}", requests


@pytest.fixture
def slotted(tmp_path: Path):
    server, url, requests = _endpoint(tmp_path, slots=4)
    yield url, requests
    server.kill()
    server.wait()


def test_each_session_keeps_its_slot_on_a_server_with_slots(slotted) -> None:
    url, requests = slotted
    sessions = ["t-alpha", "t-beta", "t-alpha", "t-gamma", "t-beta", None]
    for worker in range(2):  # two processes' clients: the slot is the session's, not the client's
        model = HttpModel(url, template_from=smoke_model_path())
        assert model.slots == 4 and model.n_ctx == 8192
        for session in sessions[worker::2]:
            model.complete("Say ok.", schema=None, max_tokens=4, session=session)
    sent = [json.loads(line) for line in requests.read_text().splitlines()]
    asked = [(s, body.get("id_slot")) for s, body in zip(sessions[0::2] + sessions[1::2], sent, strict=True)]
    assert all(body["cache_prompt"] for body in sent)
    assert asked == [(s, None if s is None else slot_of(s, 4)) for s, _ in asked]
    assert len({slot for s, slot in asked if s is not None}) > 1, "three sessions all on one slot"


def test_a_server_without_slots_is_sent_none(tmp_path: Path) -> None:
    server, url, requests = _endpoint(tmp_path, slots=0)
    try:
        model = HttpModel(url, template_from=smoke_model_path(), n_ctx=2048)
        assert model.slots == 0
        model.complete("Say ok.", schema=None, max_tokens=4, session="t-alpha")
    finally:
        server.kill()
        server.wait()
    [body] = [json.loads(line) for line in requests.read_text().splitlines()]
    assert "id_slot" not in body and body["cache_prompt"] is True

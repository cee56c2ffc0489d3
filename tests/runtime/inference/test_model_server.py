"""`agentd model serve` reports each completion's prompt reuse as llama.cpp's own server does, so a task
run through the shared server records its cached and evaluated tokens. Real server, smoke model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime.inference.http import EndpointError, HttpModel
from runtime.inference.model_file import smoke_model_path
from tests.helpers import REPO, free_port, scripted_endpoint, wait_for_port

N_CTX = 2048
# Long enough that a prefix found is plainly more than the one token a fresh context shares with nothing.
NOTES = "".join(f"- note {i}: the kettle at desk {i} is descaled on day {i % 7}.\n" for i in range(40))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("model-server")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "AGENTD_DATA_DIR": str(folder / "data"),
           "AGENTD_N_CTX": str(N_CTX)}
    log = (folder / "server.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "runtime.cli", "model", "serve", "--model", "smollm2-135m",
                               "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=60)
        yield HttpModel(f"http://127.0.0.1:{port}", template_from=smoke_model_path(), n_ctx=N_CTX)
    finally:
        server.send_signal(signal.SIGTERM)
        # uvicorn stops cleanly, then ends by the signal it was sent, as a foreground server does.
        assert server.wait(timeout=30) in (0, -signal.SIGTERM), (folder / "server.log").read_text()[-2000:]


def test_a_prompt_that_extends_the_last_one_is_evaluated_only_past_it(served: HttpModel) -> None:
    first = served.complete(f"Notes:\n{NOTES}\nSay ok.", schema=None, max_tokens=4)
    longer = served.complete(f"Notes:\n{NOTES}\nSay ok.\nNow say which desk is first.", schema=None, max_tokens=4)
    for call in (first.stats, longer.stats):
        assert call.cached_tokens is not None and call.evaluated_tokens is not None, call
        assert call.cached_tokens + call.evaluated_tokens == call.prompt_tokens, call
    assert longer.stats.cached_tokens >= first.stats.prompt_tokens - 1, (first.stats, longer.stats)
    assert longer.stats.evaluated_tokens < longer.stats.prompt_tokens - first.stats.prompt_tokens + 2


def test_a_task_coming_back_after_another_finds_its_prefix_in_the_ram_cache(served: HttpModel) -> None:
    mine = f"Notes:\n{NOTES}\nQuestion one."
    served.complete(mine, schema=None, max_tokens=4)
    served.complete("A different task's prompt, with nothing in common.\n" * 20, schema=None, max_tokens=4)
    back = served.complete(f"{mine}\nQuestion two.", schema=None, max_tokens=4)
    assert back.stats.cached_tokens > back.stats.prompt_tokens // 2, back.stats


def test_a_schema_constrained_completion_reports_its_reuse_too(served: HttpModel) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    done = served.complete(f"Notes:\n{NOTES}\nAnswer in JSON.", schema=schema, max_tokens=16)
    assert done.text.lstrip().startswith("{"), done.text
    assert done.stats.cached_tokens is not None and done.stats.cached_tokens > 0, done.stats


def test_two_workers_asking_at_once_each_get_their_whole_answer(served: HttpModel) -> None:
    prompts = [f"Notes:\n{NOTES}\nList three desks.", f"Notes:\n{NOTES}\nList three days."]
    alone = [served.complete(p, schema=None, max_tokens=24).text for p in prompts]
    together: list[str | None] = [None, None]

    def ask(i: int) -> None:
        together[i] = served.complete(prompts[i], schema=None, max_tokens=24).text

    # Two clients, as two workers are: the second arrives while the first streams.
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert together == alone


def test_a_stream_that_ends_without_a_finish_reason_is_an_error_not_an_answer(tmp_path: Path) -> None:
    with scripted_endpoint(tmp_path, ['{"action": "final_'], cut=True) as url:
        model = HttpModel(url, template_from=smoke_model_path(), n_ctx=2048)
        with pytest.raises(EndpointError, match="without a finish reason"):
            model.complete("Say ok.", schema=None, max_tokens=8)

"""`agentd stop` on a data folder that two workers of one PostgreSQL database serve stops both."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.daemon.lock import holders
from tests.helpers import REPO, free_port, scripted_endpoint


@pytest.fixture
def model_url(tmp_path: Path):
    with scripted_endpoint(tmp_path, ["{}"]) as url:
        yield url


@pytest.mark.slow
def test_stop_stops_every_worker_serving_the_data_folder(tmp_path: Path, pg_url: str, model_url: str, agentd) -> None:
    data = tmp_path / "data"
    env = {"AGENTD_DATA_DIR": str(data), "AGENTD_DATABASE_URL": pg_url, "AGENTD_MODEL_URL": model_url,
           "AGENTD_MODEL": "smollm2-135m", "AGENTD_N_CTX": "8192"}
    assert agentd("db", "upgrade", env=env).returncode == 0
    workers = [
        subprocess.Popen([sys.executable, "-m", "runtime.cli", "serve", "--port", str(free_port())],
                         env={**os.environ, **env}, cwd=REPO, stdout=subprocess.DEVNULL,
                         stderr=(tmp_path / f"worker-{n}.log").open("w"))
        for n in range(2)
    ]
    try:
        deadline = time.monotonic() + 60
        while len(holders(data)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sorted(pid for pid, _ in holders(data)) == sorted(w.pid for w in workers)
        stopped = agentd("stop", env=env, timeout=150)
        assert stopped.returncode == 0, stopped.stderr
        assert sorted(stopped.stdout.splitlines()) == sorted(f"agentd (pid {w.pid}) stopped" for w in workers)
        assert [w.wait(timeout=30) for w in workers] == [0, 0]
        assert holders(data) == []
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()

"""Shared fixtures: every test gets its own working directory and data directory, and no AGENTD_* leaks in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import runtime  # noqa: F401  first: it sets llama.cpp's thread wait policy before any test imports llama_cpp

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in a fresh folder with a fresh data directory, whatever the developer's environment holds."""
    for name in list(os.environ):
        if name.startswith("AGENTD_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def anyio_backend() -> str:
    # agentd runs on asyncio; anyio's pytest plugin would otherwise also try trio.
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / ".agentd"


@pytest.fixture
def db_url(data_dir: Path) -> str:
    data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{data_dir / 'agentd.db'}"


@pytest.fixture
def store(db_url: str):
    """A real SQLite event store in the test's data directory (test modules may define their own)."""
    from store import EventStore

    with EventStore(db_url) as s:
        yield s


@pytest.fixture(scope="module")
def model():
    """The smoke model, loaded once per test module, with no KV-state cache between tasks.

    Tests that need the model's judgement load the default model themselves.
    """
    from runtime.inference.local import LocalModel
    from runtime.inference.model_file import smoke_model_path

    return LocalModel(smoke_model_path(), kv_cache_bytes=0)


@pytest.fixture(scope="session")
def untemplated_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real GGUF model file without a chat template: the smoke model with its template key renamed."""
    from runtime.inference.model_file import smoke_model_path

    data = bytearray(smoke_model_path().read_bytes())
    key = b"tokenizer.chat_template"
    at = data.index(key)
    data[at : at + len(key)] = b"tokenizer.chat_templatX"  # same length: every offset after it still holds
    path = tmp_path_factory.mktemp("untemplated") / "untemplated.gguf"
    path.write_bytes(data)
    return path


def run_agentd(*args: str, env: dict[str, str] | None = None, input: str | None = None, timeout: float = 60):
    """Run the real `agentd` command in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=input,
        timeout=timeout,
    )


@pytest.fixture
def agentd():
    return run_agentd

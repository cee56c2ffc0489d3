"""Shared fixtures: every test gets its own working directory and data directory, and no AGENTD_* leaks in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import runtime  # noqa: F401  first: it sets llama.cpp's thread wait policy before any test imports llama_cpp
from tests.helpers import RELEASE_NOTES, SMALL_PROJECT, run_agentd, workspace_of


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


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder for a task to work in. The fixtures below hold files; a module whose tasks need
    other files defines its own, named for what it holds."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def release_workspace(tmp_path: Path) -> Path:
    """The release notes the agent loop's tests ask about."""
    return workspace_of(tmp_path, RELEASE_NOTES)


@pytest.fixture
def project_workspace(tmp_path: Path) -> Path:
    """A README, a CSV file and notes: what the framing tests show the model."""
    return workspace_of(tmp_path, SMALL_PROJECT)


@pytest.fixture
def token(data_dir: Path) -> str:
    """The page's access token in the test's data directory."""
    from runtime.web import access

    return access.page_token(data_dir)


@pytest.fixture
def app(store, token: str):
    """The page on the test's store, with the built-in tools and no status of a daemon."""
    from runtime.agent.plugins import load
    from runtime.web.app import create_app

    return create_app(store, "test-model", token=token, tools=load([]).tools)


@pytest.fixture
def waiting(store, workspace: Path) -> tuple[str, str]:
    """A task waiting for approval of a shell call whose arguments and reason carry HTML: its id and the
    approval's."""
    from tests.helpers.page import hostile_approval

    return hostile_approval(store, workspace)


CHROMIUM = Path("/usr/bin/chromium")
# No sandbox inside the container, no GPU on the VM, and nothing that talks to the network on its own
# while a test runs.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser():
    """Debian's chromium, headless, driven through playwright, for the page's tests in a real browser."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the page's browser tests drive Debian's chromium, and `make test` "
            "installs it (apt-get install chromium)",
            pytrace=False,
        )
    with sync_playwright() as p:
        # launch() gives the browser a fresh temporary profile of its own, removed when it closes.
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


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


@pytest.fixture
def agentd():
    return run_agentd

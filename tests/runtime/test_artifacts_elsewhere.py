"""Workers on several hosts share a PostgreSQL database and nothing else: an artifact one host wrote is
read on another from the database's blob table, so a task's change made on one host is shown and undone
from another, and a secret-holding blob needs the same vault key there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runtime.artifacts import ArtifactStore
from runtime.errors import ConfigError, NotFound
from runtime.secrets import Secrets
from store import EventStore
from tests.helpers import answer, call, run, scripted_runtime, submit
from tests.helpers.postgres import fresh_schema, unreachable

_WHY = unreachable()
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

TODO = b"- buy milk\n- call the plumber\n"


@pytest.fixture
def pg_url():
    yield from fresh_schema()


def host(folder: Path, store: EventStore) -> ArtifactStore:
    """A host's artifact store: its own data folder, the database's blobs behind it."""
    return ArtifactStore(folder / "artifacts", Secrets(folder), store.blobs)


def test_a_blob_written_on_one_host_is_read_on_another_and_kept_there(tmp_path: Path, pg_url: str) -> None:
    with EventStore(pg_url) as store:
        here, there = host(tmp_path / "a", store), host(tmp_path / "b", store)
        ref = here.put(b"the report\n")
        assert there.exists(ref)
        assert there.get(ref) == b"the report\n"
        assert (tmp_path / "b" / "artifacts" / ref[-64:][:2] / ref[-64:]).is_file()
        with pytest.raises(NotFound):
            there.get("artifact://sha256/" + "0" * 64)


def test_a_sealed_blob_opens_on_a_host_with_the_same_vault_key_and_names_the_key_elsewhere(
    tmp_path: Path, pg_url: str
) -> None:
    secret = b"OPENAI_API_KEY=sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c\n"
    with EventStore(pg_url) as store:
        ref = host(tmp_path / "a", store).put(secret)
        assert secret not in store.blobs.get(ref[-64:]), "a secret stored in the clear in the database"
        (tmp_path / "b").mkdir()
        shutil.copy(tmp_path / "a" / "vault.key", tmp_path / "b" / "vault.key")
        assert host(tmp_path / "b", store).get(ref) == secret
        with pytest.raises(ConfigError, match="vault.key is not the key"):
            host(tmp_path / "c", store).get(ref)


def test_a_change_made_on_one_host_is_shown_and_undone_from_another(tmp_path: Path, pg_url: str, agentd) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "todo.txt").write_bytes(TODO)
    with EventStore(pg_url) as store:
        rt = scripted_runtime(store, tmp_path / "a", [
            call("read_file", path="todo.txt"),
            call("write_file", path="todo.txt", content="- water the plants\n"),
            answer("todo.txt now holds the one line asked for."),
        ], artifacts=host(tmp_path / "a", store))
        task_id = submit(store, ws, 'Replace the list in todo.txt with the line "- water the plants"',
                         allowed_effects=("read", "write"))
        run(rt, task_id)
    assert (ws / "todo.txt").read_bytes() == b"- water the plants\n"
    elsewhere = {"AGENTD_DATA_DIR": str(tmp_path / "b"), "AGENTD_DATABASE_URL": pg_url}
    shown = agentd("task", "diff", task_id, env=elsewhere)
    assert shown.returncode == 0, shown.stderr
    assert "-- buy milk\n" in shown.stdout and "+- water the plants\n" in shown.stdout
    undone = agentd("task", "undo", task_id, env=elsewhere)
    assert undone.returncode == 0, undone.stderr
    assert (ws / "todo.txt").read_bytes() == TODO

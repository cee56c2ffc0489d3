"""`agentd memory add/list/forget` as a user runs them: the round trip through `agentd replay`, retention
from agentd.toml, redaction down to the data folder's bytes, and one line for each bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store import EventStore
from tests.helpers import one_error_line

SCOPE = ("--subject", "u1", "--tenant", "t1")


@pytest.fixture
def data(db_url: str, data_dir: Path) -> Path:
    """A data folder with its database, where the commands find it: in the folder they run in."""
    EventStore(db_url).close()
    return data_dir


def added(agentd, *args: str) -> str:
    done = agentd("memory", "add", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def listed(agentd, *args: str) -> list[dict]:
    done = agentd("memory", "list", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_memories_are_added_listed_by_scope_and_forgotten_and_a_replay_keeps_them_forgotten(agentd, data) -> None:
    key = added(agentd, *SCOPE, "--purpose", "support", "--source", "system_record", "Key created 3 days ago")
    plan = added(agentd, *SCOPE, "--purpose", "support", "--expires", "2099-01-01", "Plan: Pro")
    other = added(agentd, "--subject", "u2", "--tenant", "t2", "--purpose", "support", "Another tenant's key")
    assert [m["memory_id"] for m in listed(agentd)] == [key, plan, other]
    assert [m["memory_id"] for m in listed(agentd, "--tenant", "t1")] == [key, plan]
    assert listed(agentd, "--subject", "u1")[1]["expires_at"] == "2099-01-01T00:00:00+00:00"

    forgot = agentd("memory", "forget", plan, "--reason", "plan changed")
    assert (forgot.returncode, forgot.stdout.strip()) == (0, f"memory {plan} forgotten")
    replayed = agentd("replay")
    assert replayed.returncode == 0, replayed.stderr

    assert [m["memory_id"] for m in listed(agentd, "--tenant", "t1")] == [key]
    tomb = listed(agentd, "--forgotten", "--tenant", "t1")[1]
    assert (tomb["memory_id"], tomb["text"], tomb["forgotten_reason"]) == (plan, "", "plan changed")
    table = agentd("memory", "list", "--forgotten").stdout
    assert "Plan: Pro" not in table and "(forgotten " in table and "Key created 3 days ago" in table


def test_the_retention_in_agentd_toml_sets_the_expiry_of_a_purpose(agentd, data, tmp_path: Path) -> None:
    (tmp_path / "agentd.toml").write_text("[memory_retention_days]\nsupport = 30\n")
    inferred = added(agentd, *SCOPE, "--purpose", "support", "--source", "model_inferred", "Prefers short answers")
    [m] = listed(agentd)
    assert m["memory_id"] == inferred and m["expires_at"] is not None and m["source"] == "model_inferred"


def test_a_secret_typed_into_a_memory_never_reaches_the_data_folder(agentd, data) -> None:
    key, email = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e", "bob@example.com"
    done = agentd("memory", "add", *SCOPE, "--purpose", "support", f"key {key}, password=hunter22, mail {email}")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "agentd: redacted before it was recorded: password, api_key, email"
    assert listed(agentd)[0]["text"] == "key [redacted:api_key], password=[redacted:password], mail [redacted:email]"
    raw = b"".join(p.read_bytes() for p in data.rglob("*") if p.is_file())
    for planted in (key, "hunter22", email):
        assert planted.encode() not in raw, planted


@pytest.mark.parametrize(("args", "code", "says"), [
    (("add", *SCOPE, "Key created"), 2, "Missing option '--purpose'"),
    (("add", *SCOPE, "--purpose", "support", "--source", "hearsay", "Key created"), 1, "source 'hearsay'"),
    (("add", *SCOPE, "--purpose", "support", "--expires", "2026-13-01", "Key created"), 1, "--expires '2026-13-01'"),
    (("add", *SCOPE, "--purpose", "support", "--review", "soon", "Key created"), 1, "--review 'soon'"),
    (("add", *SCOPE, "--purpose", "support", "--source", "model_inferred", "Guess"), 1, "expiry or a review date"),
    (("forget", "m-0123456789"), 1, "no memory 'm-0123456789'"),
], ids=["missing purpose", "unknown source", "bad expiry", "bad review date", "inferred without expiry",
        "unknown id"])
def test_bad_input_is_refused_in_one_line_with_a_non_zero_exit_and_records_nothing(
    agentd, data, args: tuple[str, ...], code: int, says: str
) -> None:
    one_error_line(agentd("memory", *args), says, code=code)
    assert listed(agentd, "--forgotten") == []

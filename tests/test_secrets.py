"""Secrets planted in a goal, a file, a tool's result and a skill: the task works with their placeholders,
the file it was asked to write gets the key, and none of them is anywhere else but the vault."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from runtime import logs
from runtime.harness.tasks import append_decided, say, submit
from runtime.secrets import Secrets
from store import EventStore
from store.events import SkillActivated, TaskSubmitted, ToolCallExecuted, ToolCallProposed, UserSaid
from tests.helpers import answer, call, events, run, run_agentd
from tests.helpers.task import framing_runtime

GOAL_KEY = "sk-live-4f9a0c21d4e8b7a6c5d3"
FILE_PASSWORD = "Zebra-Stapler-9147"
TOOL_TOKEN = "xoxb-2231-9083-ZTrq7PvaXcLm"
SKILL_KEY = "AKIAQX7V3K9LM2PT4RWZ"
SAID_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PLANTED = (GOAL_KEY, SKILL_KEY, FILE_PASSWORD, TOOL_TOKEN, SAID_TOKEN)  # in the order the task meets them


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    folder = tmp_path / "skills" / "deploy-keys"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: deploy-keys\ndescription: Sets up deploy keys. Use when asked to store a key.\n"
        "allowed-tools: run_skill_script\n---\n\n"
        f"The staging account's key id is {SKILL_KEY}. Run scripts/token.py to get the bot token.\n"
    )
    (folder / "scripts" / "token.py").write_text(f"print('bot token: {TOOL_TOKEN}')\n")
    return folder.parent


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.txt").write_text(f"host: db.internal\npassword: {FILE_PASSWORD}\n")
    return ws


def test_planted_secrets_appear_only_in_the_vault_and_in_the_file_the_task_was_asked_to_write(
    tmp_path, data_dir, store, planted, skills
) -> None:
    logs.configure(log_file=data_dir / "logs" / "agentd.log", level="debug", console=False)
    secrets = Secrets(data_dir)
    replies = [
        call("read_file", path="config.txt"),
        call("run_skill_script", skill="deploy-keys", script="scripts/token.py"),
        call("write_file", path=".env", content="API_KEY=[secret:1]\n"),
        answer("Your key [secret:1] is in .env; the database password is [secret:3]."),
        call("write_file", path="github.txt", content="[secret:5]\n"),
        answer("Saved."),
    ]
    rt = framing_runtime(store, tmp_path, replies, skill_roots=[skills])
    rt.artifacts.secrets = secrets
    goal = f"/deploy-keys Put my key {GOAL_KEY} in .env as API_KEY, and tell me what config.txt says."
    task_id, _ = submit(lambda: store, goal, planted, profiles=rt.profiles, default_policy="auto",
                        allowed=("write", "external"), actor="ann", secrets=secrets)
    assert run(rt, task_id) == "completed"
    append_decided(store, task_id, lambda records: say(records, f"Also keep the token {SAID_TOKEN} in github.txt"),
                   "ann", secrets)
    assert run(rt, task_id) == "completed"
    logs.configure(log_file=None, console=False)

    # The model saw and wrote placeholders; the tools got the values where it put them.
    assert (planted / ".env").read_text() == f"API_KEY={GOAL_KEY}\n"
    assert (planted / "github.txt").read_text() == f"{SAID_TOKEN}\n"
    [submitted] = events(store, task_id, TaskSubmitted)
    assert "Put my key [secret:1] in .env" in submitted.goal
    [skill] = events(store, task_id, SkillActivated)
    assert "key id is [secret:2]." in skill.body
    read, script, *_ = events(store, task_id, ToolCallExecuted)
    assert "password: [secret:3]" in str(read.observation) and "bot token: [secret:4]" in str(script.observation)
    assert "[secret:5]" in events(store, task_id, UserSaid)[0].text
    assert events(store, task_id, ToolCallProposed)[2].arguments["content"] == "API_KEY=[secret:1]\n"
    assert rt.secrets.vault(store, task_id).values == dict(enumerate(PLANTED, start=1))
    for prompt in rt.model.prompts:
        assert not [s for s in PLANTED if s in prompt]

    # Nowhere else: the database's bytes (the vault holds ciphertext), the artifact store, the logs, and
    # an export made to share, which still imports and replays.
    env = {"AGENTD_DATA_DIR": str(data_dir)}
    shared = tmp_path / "shared.jsonl"
    exported = run_agentd("events", "export", "--redact", "-o", str(shared), env=env)
    assert exported.returncode == 0, exported.stderr
    elsewhere = tmp_path / "elsewhere"
    imported = run_agentd("events", "import", str(shared), env={"AGENTD_DATA_DIR": str(elsewhere)})
    assert imported.returncode == 0, imported.stderr
    replayed = run_agentd("replay", env={"AGENTD_DATA_DIR": str(elsewhere)})
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    # The task's trace is built from its events, which hold placeholders only.
    traced = run_agentd("trace", "export", "--task", task_id, "-o", str(tmp_path / "spans.jsonl"), env=env)
    assert traced.returncode == 0, traced.stderr
    assert "execute_tool write_file" in (tmp_path / "spans.jsonl").read_text()
    store.close()
    leaks = {
        str(path): [s for s in PLANTED if s.encode() in path.read_bytes()]
        for folder in (data_dir, tmp_path / "artifacts", elsewhere) for path in folder.rglob("*") if path.is_file()
    }
    for kept in (shared, tmp_path / "spans.jsonl"):
        leaks[str(kept)] = [s for s in PLANTED if s in kept.read_text()]
    assert {path: found for path, found in leaks.items() if found} == {}
    assert (data_dir / "logs" / "agentd.log").stat().st_size > 0


def test_a_secret_handed_to_a_sub_task_keeps_its_value_and_is_never_recorded_bare(
    tmp_path, data_dir, store, planted
) -> None:
    from runtime.agent.profiles import WORKSPACE
    from runtime.harness.delegation import Delegate

    # The parent numbers the goal's key 1 and the file's password 2; the sub-task meets the password first.
    replies = [
        call("read_file", path="config.txt"),
        call("delegate", question="Write the password [secret:2] to pw.txt.", scope=["result:c1"],
             tools=["write_file"]),
        call("write_file", path="pw.txt", content="[secret:1]"),  # the sub-task's own number for it
        answer("The password [secret:1] is in pw.txt."),
        answer("The sub-task wrote the password [secret:2] to pw.txt."),
    ]
    rt = framing_runtime(store, tmp_path, replies)
    rt.artifacts.secrets = Secrets(data_dir)
    tool = Delegate()
    rt.tools.register(tool)
    tool.bind(rt)
    rt.profiles["lead"] = WORKSPACE.model_copy(update={"name": "lead", "tools": (*WORKSPACE.tools, "delegate")})
    task_id, _ = submit(lambda: store, f"My key is {GOAL_KEY}. Have a sub-task put the config's password in pw.txt.",
                        planted, profile="lead", profiles=rt.profiles, default_policy="auto", allowed=("write",),
                        actor="ann", secrets=rt.secrets)
    assert run(rt, task_id) == "completed"

    assert (planted / "pw.txt").read_text() == FILE_PASSWORD
    sub_id = f"{task_id}.c2"
    assert rt.secrets.vault(store, sub_id).values == {1: FILE_PASSWORD}
    [sub_goal] = events(store, sub_id, TaskSubmitted)
    assert sub_goal.goal.startswith("Write the password [secret:1] to pw.txt.")
    assert "password: [secret:1]" in sub_goal.goal
    delegated = [e for e in events(store, task_id, ToolCallExecuted) if e.tool == "delegate"][0]
    assert delegated.observation["answer"] == "The password [secret:2] is in pw.txt."
    for prompt in rt.model.prompts:
        assert FILE_PASSWORD not in prompt and GOAL_KEY not in prompt
    store.close()
    leaks = [str(p) for folder in (data_dir, tmp_path / "artifacts") for p in folder.rglob("*")
             if p.is_file() and (FILE_PASSWORD.encode() in p.read_bytes() or GOAL_KEY.encode() in p.read_bytes())]
    assert leaks == []


def test_a_placeholder_of_no_secret_of_the_task_is_refused_and_nothing_is_written(
    tmp_path, data_dir, store, planted
) -> None:
    rt = framing_runtime(store, tmp_path, [call("write_file", path="out.txt", content="[secret:7]"), answer("no")])
    task_id, _ = submit(lambda: store, "write out.txt", planted, profiles=rt.profiles, default_policy="auto",
                        allowed=("write",), actor="ann", secrets=rt.secrets)
    run(rt, task_id)
    [refused] = events(store, task_id, ToolCallExecuted)
    assert refused.status == "invalid_arguments"
    assert "[secret:7] names no secret of this task" in str(refused.observation)
    assert not (planted / "out.txt").exists()


def test_the_same_secret_keeps_its_number_across_processes_and_another_task_has_its_own(data_dir, store) -> None:
    first = Secrets(data_dir).vault(store, "t-1")
    assert first.hide(f"key {GOAL_KEY}") == "key [secret:1]"
    assert first.hide(f"password: {FILE_PASSWORD}, again {GOAL_KEY}") == "password: [secret:2], again [secret:1]"
    with EventStore(store.url) as other:
        again = Secrets(data_dir).vault(other, "t-1")
        assert again.hide(f"{FILE_PASSWORD} and {GOAL_KEY}") == "[secret:2] and [secret:1]"
        assert again.reveal({"content": ["[secret:2]"]}) == {"content": [FILE_PASSWORD]}
    assert Secrets(data_dir).vault(store, "t-2").hide(f"password: {FILE_PASSWORD}") == "password: [secret:1]"
    with sqlite3.connect(data_dir / "agentd.db") as conn:
        assert conn.execute("SELECT count(*) FROM secrets").fetchone() == (3,)
    assert os.stat(data_dir / "vault.key").st_mode & 0o077 == 0


def test_a_bad_secret_pattern_in_the_config_is_one_line_and_exit_2(tmp_path) -> None:
    (tmp_path / "agentd.toml").write_text('secret_patterns = ["T-[0-9"]\n')
    result = run_agentd("task", "list")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("agentd: invalid value for secret_patterns") and "'T-[0-9'" in line


def _task_with_secrets(tmp_path: Path, data_dir: Path, store) -> str:
    """A task whose goal holds a key and whose run read a file with a password: two secrets in its vault."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "config.txt").write_text(f"password: {FILE_PASSWORD}\n")
    secrets = Secrets(data_dir)
    rt = framing_runtime(store, tmp_path, [call("read_file", path="config.txt"), answer("It holds [secret:2].")])
    rt.artifacts.secrets = secrets
    task_id, _ = submit(lambda: store, f"My key is {GOAL_KEY}. What does config.txt hold?", ws,
                        profiles=rt.profiles, default_policy="auto", actor="ann", secrets=secrets)
    assert run(rt, task_id) == "completed"
    assert rt.secrets.vault(store, task_id).values == {1: GOAL_KEY, 2: FILE_PASSWORD}
    return task_id


def test_a_vault_exported_beside_the_log_goes_in_with_it_sealed_under_the_new_folders_key(
    tmp_path, data_dir, store
) -> None:
    task_id = _task_with_secrets(tmp_path, data_dir, store)
    env = {"AGENTD_DATA_DIR": str(data_dir)}
    log_file, vault_file = tmp_path / "log.jsonl", tmp_path / "vault.jsonl"
    exported = run_agentd("events", "export", "-o", str(log_file), "--vault", str(vault_file), env=env)
    assert exported.returncode == 0, exported.stderr
    assert "wrote 2 secrets to" in exported.stderr
    assert os.stat(vault_file).st_mode & 0o077 == 0, "plain-text secrets are for their owner's eyes alone"
    assert not [s for s in (GOAL_KEY, FILE_PASSWORD) if s in log_file.read_text()], "the export stays safe to share"

    elsewhere = tmp_path / "elsewhere"
    imported = run_agentd("events", "import", str(log_file), "--vault", str(vault_file),
                          env={"AGENTD_DATA_DIR": str(elsewhere)})
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip().endswith("events and 2 secrets")
    assert (elsewhere / "vault.key").read_bytes() != (data_dir / "vault.key").read_bytes()
    with EventStore(f"sqlite:///{elsewhere / 'agentd.db'}") as there:
        vault = Secrets(elsewhere).vault(there, task_id)
        assert vault.values == {1: GOAL_KEY, 2: FILE_PASSWORD}
        # A tool call in the new folder gets the value, and the same value found again keeps its number.
        assert vault.reveal({"content": "[secret:2]"}) == {"content": FILE_PASSWORD}
        assert vault.hide(f"again {GOAL_KEY}") == "again [secret:1]"
    assert FILE_PASSWORD.encode() not in (elsewhere / "agentd.db").read_bytes(), "sealed, not stored bare"


def test_a_vault_file_that_is_not_the_logs_own_is_refused_and_nothing_is_imported(tmp_path, data_dir, store) -> None:
    _task_with_secrets(tmp_path, data_dir, store)
    env = {"AGENTD_DATA_DIR": str(data_dir)}
    log_file, vault_file = tmp_path / "log.jsonl", tmp_path / "vault.jsonl"
    assert run_agentd("events", "export", "-o", str(log_file), "--vault", str(vault_file), env=env).returncode == 0
    header, *rows = vault_file.read_text().splitlines()
    other_log = header.replace('"log_last_hash":"', '"log_last_hash":"0')
    bad = {
        "another log's": ("\n".join([other_log, *rows]) + "\n", "not this one"),
        "cut short": ("\n".join([header, *rows[:-1]]) + "\n", "says 2 secrets but the file holds 1"),
        "a row twice": ("\n".join([header, rows[0], rows[0]]) + "\n", "is there twice"),
        "not a vault": ('{"trailer": {}}\n', "not a vault file"),
        "empty": ("", "has no header line"),
    }
    for name, (text, why) in bad.items():
        given = tmp_path / f"{name}.jsonl"
        given.write_text(text)
        elsewhere = tmp_path / f"elsewhere-{name}"
        result = run_agentd("events", "import", str(log_file), "--vault", str(given),
                            env={"AGENTD_DATA_DIR": str(elsewhere)})
        assert result.returncode != 0, name
        [line] = result.stderr.strip().splitlines()
        assert why in line, (name, line)
        listed = run_agentd("events", "list", env={"AGENTD_DATA_DIR": str(elsewhere)})
        assert "(none)" in listed.stdout or listed.stdout.strip() == "", (name, listed.stdout)


def test_a_vault_asked_for_with_a_redacted_export_is_a_usage_error_and_nothing_is_written(
    tmp_path, data_dir, store
) -> None:
    _task_with_secrets(tmp_path, data_dir, store)
    log_file, vault_file = tmp_path / "log.jsonl", tmp_path / "vault.jsonl"
    result = run_agentd("events", "export", "--redact", "-o", str(log_file), "--vault", str(vault_file),
                        env={"AGENTD_DATA_DIR": str(data_dir)})
    assert result.returncode == 2
    assert "--vault writes the secrets --redact takes out" in result.stderr
    assert not log_file.exists() and not vault_file.exists()


def test_a_vault_is_imported_only_into_a_folder_whose_vault_is_empty(tmp_path, data_dir, store) -> None:
    _task_with_secrets(tmp_path, data_dir, store)
    log_file, vault_file = tmp_path / "log.jsonl", tmp_path / "vault.jsonl"
    exported = run_agentd("events", "export", "-o", str(log_file), "--vault", str(vault_file),
                          env={"AGENTD_DATA_DIR": str(data_dir)})
    assert exported.returncode == 0, exported.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with EventStore(f"sqlite:///{elsewhere / 'agentd.db'}") as there:
        assert Secrets(elsewhere).vault(there, "t-own").hide(f"key {SKILL_KEY}") == "key [secret:1]"
    result = run_agentd("events", "import", str(log_file), "--vault", str(vault_file),
                        env={"AGENTD_DATA_DIR": str(elsewhere)})
    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert "vault already holds secrets" in line
    with sqlite3.connect(elsewhere / "agentd.db") as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,), "the events went back out with it"
        assert conn.execute("SELECT count(*) FROM secrets").fetchone() == (1,)

"""Signed exports: the unkeyed chain proves a file whole, not who made it; the data folder's key tells an
export of this agentd from an edited one whose chain and trailer were computed again. And every line of
an export carries its hash."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path
from typing import Callable

import pytest

from store import EventStore, chain
from store.events import (
    ApprovalGranted,
    ApprovalRequested,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)
from tests.helpers import one_error_line

KEY = "export.key"


def approved_shell_call(db_url: str) -> None:
    """A task of tenant acme whose shell call ann approved and which ran with exit code 0: lines 1 to 7."""
    with EventStore(db_url) as store:
        store.append("t-1", [TaskSubmitted(goal="clean the build", workspace="/w", tenant="acme"),
                             TaskPhaseChanged(phase=TaskPhase.RUNNING),
                             ToolCallProposed(call_id="c1", tool="shell", arguments={"command": "make clean"}),
                             ApprovalRequested(approval_id="ap-1", call_id="c1", tool="shell", arguments_hash="h")])
        store.append("t-1", [ApprovalGranted(approval_id="ap-1", by="ann")])
        store.append("t-1", [ToolCallStarted(call_id="c1", tool="shell", idempotent=False, effects=("external",)),
                             ToolCallExecuted(call_id="c1", tool="shell", status="ok", observation={"exit_code": 0})])


def exported(agentd, data_dir: Path, out: Path, *flags: str) -> list[str]:
    done = agentd("--data-dir", str(data_dir), "events", "export", *flags, "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8").splitlines(keepends=True)


def hashed_again(lines: list[str], edit: Callable[[dict], None]) -> list[str]:
    """What anyone can do to an export: edit its events, then compute each hash and the trailer again, as
    store/chain.py defines them. Signatures are kept as they were: no one without the key can make them."""
    out, prev, count, last_seq = [], chain.GENESIS, 0, 0
    for line in lines[:-1]:
        obj = json.loads(line)
        edit(obj)
        payload = json.dumps(obj["payload"], ensure_ascii=False, separators=(",", ":"))
        row = (obj["seq"], obj["stream_id"], obj["stream_version"], obj["type"], obj["schema_version"], payload,
               obj["recorded_at"], obj["actor"], obj["causation_id"], obj["correlation_id"])
        prev = obj["hash"] = chain.link(prev, row)
        count, last_seq = count + 1, obj["seq"]
        out.append(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    trailer = json.loads(lines[-1])
    trailer["trailer"].update(count=count, last_seq=last_seq, last_hash=prev)
    return out + [json.dumps(trailer, separators=(",", ":")) + "\n"]


def written(tmp_path: Path, lines: list[str], name: str = "edited.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(lines), encoding="utf-8")
    return path


def approver(obj: dict) -> None:
    if obj["type"] == "ApprovalGranted":
        obj["payload"]["by"] = "mallory"


def tool_result(obj: dict) -> None:
    if obj["type"] == "ToolCallExecuted":
        obj["payload"]["observation"]["exit_code"] = 1


def tenant(obj: dict) -> None:
    if obj["type"] == "TaskSubmitted":
        obj["payload"]["tenant"] = "globex"


@pytest.mark.parametrize(("edit", "line"), [(approver, 5), (tool_result, 7), (tenant, 1)],
                         ids=["approver-changed", "tool-result-flipped", "task-moved-to-another-tenant"])
def test_an_edited_export_hashed_again_passes_the_chain_but_not_the_key(agentd, tmp_path, data_dir, db_url, edit,
                                                                       line):
    approved_shell_call(db_url)
    lines = exported(agentd, data_dir, tmp_path / "log.jsonl", "--sign")
    forged = written(tmp_path, hashed_again(lines, edit))
    assert forged.read_text() != "".join(lines), "the edit changed nothing: the test proves nothing"
    # What the unkeyed chain cannot tell: the file is whole, whoever made it.
    unkeyed = agentd("events", "verify", str(forged))
    assert unkeyed.returncode == 0 and "not checked" in unkeyed.stdout, (unkeyed.stdout, unkeyed.stderr)
    key = ("--key", str(data_dir / KEY))
    refused = one_error_line(agentd("events", "verify", *key, str(forged)), f"line {line}", "not signed with")
    target = ("--data-dir", str(tmp_path / "target"))
    assert one_error_line(agentd(*target, "events", "import", *key, str(forged))) == refused
    assert agentd(*target, "events", "list").stdout.strip() == "(none)", "a refused import left events behind"


def test_a_signed_export_verifies_and_imports_with_the_key_of_the_folder_that_made_it(
    agentd, tmp_path, data_dir, db_url
) -> None:
    approved_shell_call(db_url)
    assert not (data_dir / KEY).exists()
    lines = exported(agentd, data_dir, tmp_path / "log.jsonl", "--sign")
    key = data_dir / KEY
    # Made on first need, for its owner alone, and never part of what is exported.
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    secret = key.read_text().strip()
    assert len(secret) == 64 and secret not in "".join(lines)
    assert exported(agentd, data_dir, tmp_path / "again.jsonl", "--sign") == lines, "a second key was made"
    verified = agentd("events", "verify", "--key", str(key), str(tmp_path / "log.jsonl"))
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("ok: 7 events") and "signed with this key" in verified.stdout, verified.stdout
    target = tmp_path / "target"
    imported = agentd("--data-dir", str(target), "events", "import", "--key", str(key), str(tmp_path / "log.jsonl"))
    assert imported.returncode == 0 and "imported 7 events" in imported.stdout, imported.stderr
    assert agentd("--data-dir", str(target), "db", "check").stdout.strip() == "ok"
    assert not (target / KEY).exists(), "importing made a key"


def test_an_export_signed_in_another_folder_is_refused_with_this_key(agentd, tmp_path, data_dir, db_url) -> None:
    approved_shell_call(db_url)
    exported(agentd, data_dir, tmp_path / "log.jsonl", "--sign")
    other = tmp_path / "other"
    with EventStore(f"sqlite:///{(other.mkdir() or other) / 'agentd.db'}") as store:
        store.append("t-9", [TaskSubmitted(goal="elsewhere", workspace="/w")])
    exported(agentd, other, tmp_path / "other.jsonl", "--sign")
    one_error_line(agentd("events", "verify", "--key", str(other / KEY), str(tmp_path / "log.jsonl")),
                   "line 1", "not signed with this key")


def test_a_signed_export_cut_short_and_sealed_again_is_refused_with_the_key(agentd, tmp_path, data_dir, db_url):
    approved_shell_call(db_url)
    lines = exported(agentd, data_dir, tmp_path / "log.jsonl", "--sign")
    cut = written(tmp_path, hashed_again(lines[:-3] + lines[-1:], lambda obj: None))
    assert agentd("events", "verify", str(cut)).returncode == 0
    one_error_line(agentd("events", "verify", "--key", str(data_dir / KEY), str(cut)), "trailer", "not signed with")


def test_an_export_whose_signatures_were_taken_out_is_refused_with_the_key(agentd, tmp_path, data_dir, db_url):
    approved_shell_call(db_url)
    lines = exported(agentd, data_dir, tmp_path / "log.jsonl", "--sign")

    def unsigned(obj: dict) -> None:
        obj.pop("mac")

    stripped = hashed_again(lines, unsigned)
    trailer = json.loads(stripped[-1])
    del trailer["trailer"]["key_id"], trailer["trailer"]["mac"]
    stripped[-1] = json.dumps(trailer) + "\n"
    source = written(tmp_path, stripped)
    assert "unsigned" in agentd("events", "verify", str(source)).stdout
    one_error_line(agentd("events", "verify", "--key", str(data_dir / KEY), str(source)), "line 1", "not signed")


def test_an_export_is_unsigned_unless_asked_and_the_folder_gets_no_key(agentd, tmp_path, data_dir, db_url) -> None:
    approved_shell_call(db_url)
    lines = exported(agentd, data_dir, tmp_path / "log.jsonl")
    assert not (data_dir / KEY).exists()
    assert all('"mac"' not in line for line in lines)
    assert "unsigned" in agentd("events", "verify", str(tmp_path / "log.jsonl")).stdout


def test_a_key_file_that_is_not_a_key_is_a_usage_error_naming_the_flag(agentd, tmp_path, data_dir, db_url) -> None:
    approved_shell_call(db_url)
    exported(agentd, data_dir, tmp_path / "log.jsonl", "--sign")
    (tmp_path / "bad.key").write_text("hunter2\n")
    for path in (tmp_path / "bad.key", tmp_path / "missing.key"):
        one_error_line(agentd("events", "verify", "--key", str(path), str(tmp_path / "log.jsonl")), "--key", str(path),
                       code=2)


# -- every line carries its hash ------------------------------------------------------------------------


def test_a_line_without_its_hash_is_refused_by_verify_and_import_naming_the_line(agentd, tmp_path, data_dir, db_url):
    approved_shell_call(db_url)
    lines = exported(agentd, data_dir, tmp_path / "log.jsonl")
    obj = json.loads(lines[2])
    del obj["hash"]
    lines[2] = json.dumps(obj) + "\n"
    source = written(tmp_path, lines)
    target = ("--data-dir", str(tmp_path / "target"))
    for command in ("verify", "import"):
        one_error_line(agentd(*target, "events", command, str(source)), "line 3", "no hash")
    assert agentd(*target, "events", "list").stdout.strip() == "(none)", "a refused import left events behind"


def test_export_refuses_a_log_whose_chain_breaks_in_the_line_db_check_gives(agentd, tmp_path, data_dir, db_url):
    """A row changed in the database behind agentd's back is never sealed, let alone signed."""
    approved_shell_call(db_url)
    with sqlite3.connect(data_dir / "agentd.db") as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET actor = 'mallory' WHERE seq = 5")
    conn.close()
    checked = one_error_line(agentd("--data-dir", str(data_dir), "db", "check"), "event 5")
    out = tmp_path / "log.jsonl"
    assert one_error_line(agentd("--data-dir", str(data_dir), "events", "export", "--sign", "-o", str(out))) == checked
    assert not out.exists()

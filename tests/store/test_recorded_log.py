"""A log recorded by an earlier agentd (tests/fixtures/recorded-log.jsonl) still imports, folds and
re-runs with no divergence: a restructuring that changes no behaviour must keep it so."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import FIXTURES

FIXTURE = FIXTURES / "recorded-log.jsonl"
TASK = "t-1"


def env(tmp_path: Path) -> dict[str, str]:
    # The log was recorded on the smoke model; a re-run renders and counts with the same one.
    return {"AGENTD_DATA_DIR": str(tmp_path / "data"), "AGENTD_MODEL": "smollm2-135m",
            "AGENTD_SKILLS_DIRS": str(tmp_path / "no-skills")}


def recorded() -> list[dict]:
    """The fixture's events, without the trailer line that ends it."""
    return [e for e in map(json.loads, FIXTURE.read_text().splitlines()) if "trailer" not in e]


def imported(agentd, tmp_path: Path) -> dict[str, str]:
    e = env(tmp_path)
    done = agentd("events", "import", str(FIXTURE), env=e)
    assert done.returncode == 0, done.stderr
    return e


def test_the_recorded_log_folds_into_projections_that_match_a_rebuild(agentd, tmp_path: Path) -> None:
    e = imported(agentd, tmp_path)
    replay = agentd("replay", env=e)
    assert replay.returncode == 0, replay.stderr
    shown = json.loads(agentd("task", "show", TASK, "--json", env=e).stdout)
    assert shown["summary"]["phase"] == "completed"
    assert [(a["tool"], a["status"]) for a in shown["actions"]] == [
        ("read_file", "ok"), ("edit_file", "ok"), ("shell", "ok"),
    ]
    assert [a["status"] for a in shown["approvals"]] == ["granted"]


def test_the_recorded_task_as_of_its_approval_request_is_waiting(agentd, tmp_path: Path) -> None:
    e = imported(agentd, tmp_path)
    seq = next(e["seq"] for e in recorded() if e["type"] == "ApprovalRequested")
    shown = json.loads(agentd("task", "show", TASK, "--at", str(seq + 1), "--json", env=e).stdout)
    assert shown["summary"]["phase"] == "awaiting_approval"
    assert [a["status"] for a in shown["approvals"]] == ["pending"]


def test_the_recorded_task_reruns_on_its_outputs_with_no_divergence(agentd, tmp_path: Path) -> None:
    e = imported(agentd, tmp_path)
    rerun = agentd("replay", "--task", TASK, "--recorded", env=e, timeout=120)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "every manifest and outcome matches" in rerun.stdout


def test_the_recorded_task_reassembles_under_another_policy_from_the_command_line(agentd, tmp_path: Path) -> None:
    e = imported(agentd, tmp_path)
    firsts = [e["payload"] for e in recorded() if e["type"] == "ModelCalled" and e["payload"]["attempt"] == 1]
    same = agentd("replay", "--task", TASK, "--policy", "auto", "--json", env=e, timeout=120)
    assert same.returncode == 0, same.stderr
    calls = json.loads(same.stdout)["calls"]
    # Recorded under the default, which cut nothing: built again the same, token for token.
    assert [(c["call_index"], c["tokens"], c["left_out"]) for c in calls] == [
        (p["call_index"], p["prompt_tokens"], 0) for p in firsts
    ]
    window = agentd("replay", "--task", TASK, "--policy", "window:1", env=e, timeout=120)
    assert window.returncode == 0, window.stderr
    lines = window.stdout.splitlines()
    assert lines[0] == f"{TASK} under window:1: each decision's first request, built from the recorded history"
    assert lines[1].split()[:4] == ["CALL", "RECORDED", "TOKENS", "LEFT"]
    last = lines[-1].split()
    assert int(last[3]) == 2 * (len(firsts) - 2) and int(last[2]) < int(last[1])


def test_the_recorded_task_shows_where_its_tokens_went(agentd, tmp_path: Path) -> None:
    e = imported(agentd, tmp_path)
    called = [e["payload"] for e in recorded() if e["type"] == "ModelCalled"]
    shown = json.loads(agentd("task", "show", TASK, "--buckets", "--json", env=e).stdout)
    rows = shown["calls"]
    assert [(r["call_index"], r["attempt"]) for r in rows] == [(c["call_index"], c["attempt"]) for c in called]
    for row, c in zip(rows, called, strict=True):
        b = c["manifest"]["buckets"]
        assert (row["system"], row["tool_definitions"], row["tool_results"], row["conversation"], row["total"]) == (
            b["system"], b["tool_definitions"], b["tool_results"], b["conversation"], b["total"]
        )
    assert [r["billed"] for r in rows] == [sum(c["prompt_tokens"] for c in called[: n + 1]) for n in range(len(called))]
    assert shown["billed"] == rows[-1]["billed"] and shown["evaluated"] == sum(c["evaluated_tokens"] for c in called)
    assert "read_file" not in shown["unused_tools"] and "shell" not in shown["unused_tools"]
    assert shown["unused_tools"] and shown["unused_tool_definitions"] > 0
    text = agentd("task", "show", TASK, "--buckets", env=e).stdout
    assert text.splitlines()[0].split()[:4] == ["STEP", "TRY", "SYSTEM", "TOOL"]
    assert f"tokens billed {shown['billed']}, evaluated {shown['evaluated']}" in text

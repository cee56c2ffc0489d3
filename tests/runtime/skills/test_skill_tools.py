"""The skill resource tools on real skill folders and real processes, and the bundled skills' scripts."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from runtime.agent import proposal
from runtime.artifacts import ArtifactStore
from runtime.inference.grammar import schema_grammar
from runtime.skills.tools import FACT_ACTIVE_SKILLS, ReadSkillFile, RunSkillScript, register_skill_tools
from runtime.tools import ToolContext, ToolRegistry, execute
from runtime.tools.schema import inline_schema
from tests.helpers import REPO, process_gone

BUNDLED = REPO / "skills"


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    folder = tmp_path / "skills" / "demo"
    (folder / "references").mkdir(parents=True)
    (folder / "scripts").mkdir()
    (folder / "SKILL.md").write_text("---\nname: demo\ndescription: a demo skill\n---\n# Demo\n")
    (folder / "references" / "guide.md").write_text("step one\nstep two\n")
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside"
    target.mkdir()
    (target / "secret.txt").write_text("top secret\n")
    (target / "evil.sh").write_text("echo pwned > pwned.txt\n")
    return target


def make_ctx(tmp_path: Path, workspace: Path, **skills: Path) -> ToolContext:
    return ToolContext(
        task_id="task-1",
        tenant="acme",
        actor="agent",
        workspace=workspace,
        artifacts=ArtifactStore(tmp_path / "data" / "artifacts"),
        facts={FACT_ACTIVE_SKILLS: {name: str(folder) for name, folder in skills.items()}},
    )


@pytest.fixture
def ctx(tmp_path: Path, workspace: Path, skill: Path) -> ToolContext:
    return make_ctx(tmp_path, workspace, demo=skill)


def read(ctx: ToolContext, path: str, skill: str = "demo"):
    return execute(ReadSkillFile(), ctx, {"skill": skill, "path": path})


def run(ctx: ToolContext, script: str, *args: str, skill: str = "demo", **kw):
    return execute(RunSkillScript(**kw), ctx, {"skill": skill, "script": script, "args": list(args)}, approved=True)


def write_script(skill: Path, name: str, text: str, mode: int = 0o644) -> None:
    path = skill / "scripts" / name
    path.write_text(text)
    path.chmod(mode)


# --- read_skill_file ----------------------------------------------------------------------------------


def test_a_file_of_an_active_skill_is_read_with_its_hash(ctx) -> None:
    outcome = read(ctx, "references/guide.md")

    data = b"step one\nstep two\n"
    assert outcome.status == "ok"
    assert outcome.observation == {
        "tool": "read_skill_file",
        "status": "ok",
        "skill": "demo",
        "path": "references/guide.md",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "lines": 2,
        "text": data.decode(),
    }
    # Skill files are not workspace files: nothing for the workspace's artifact index.
    assert outcome.artifact_events == ()


def test_skill_md_itself_can_be_read_and_inner_dotdots_are_fine(ctx) -> None:
    assert read(ctx, "SKILL.md").observation["text"].startswith("---\nname: demo")
    assert read(ctx, "references/../SKILL.md").observation["path"] == "SKILL.md"


def test_a_long_skill_file_is_masked_into_an_artifact(ctx, skill) -> None:
    text = "".join(f"rule {i}: {'y' * 50}\n" for i in range(200))
    (skill / "references" / "long.md").write_text(text)

    outcome = read(ctx, "references/long.md")

    assert outcome.observation["truncated"] is True and "text" not in outcome.observation
    assert outcome.observation["lines"] == 200
    assert json.loads(ctx.artifacts.get(outcome.artifact_ref))["text"] == text


def test_a_skill_that_is_not_active_is_refused_by_both_tools(tmp_path, workspace, skill) -> None:
    write_script(skill, "touch.sh", "touch ran.txt\n")
    other = tmp_path / "skills" / "other"
    other.mkdir()
    (other / "SKILL.md").write_text("other\n")
    ctx = make_ctx(tmp_path, workspace, other=other)

    reading = read(ctx, "SKILL.md")
    running = run(ctx, "scripts/touch.sh")
    nothing_active = read(make_ctx(tmp_path, workspace), "SKILL.md")

    for outcome in (reading, running, nothing_active):
        assert (outcome.status, outcome.error) == ("refused", "skill_not_active")
        assert "a demo skill" not in json.dumps(outcome.observation)
    assert reading.observation["details"]["active"] == ["other"]
    assert not (workspace / "ran.txt").exists()


def escape_paths(skill: Path, outside: Path) -> dict[str, str]:
    (skill / "references" / "secret_link.txt").symlink_to(outside / "secret.txt")
    (skill / "scripts" / "evil_link.sh").symlink_to(outside / "evil.sh")
    (skill / "linked_dir").symlink_to(outside)
    (skill / "references" / "up").symlink_to("../..")
    return {
        "dotdot": "../../outside/secret.txt",
        "dotdot_inside": "references/../../../outside/secret.txt",
        "absolute": str(outside / "secret.txt"),
        "absolute_inside_the_skill": str(skill / "SKILL.md"),
        "etc": "/etc/passwd",
        "file_symlink": "references/secret_link.txt",
        "directory_symlink": "linked_dir/secret.txt",
        "symlinked_level_in_the_middle": "references/up/../outside/secret.txt",
    }


ESCAPES = [
    "dotdot",
    "dotdot_inside",
    "absolute",
    "absolute_inside_the_skill",
    "etc",
    "file_symlink",
    "directory_symlink",
    "symlinked_level_in_the_middle",
]


@pytest.mark.parametrize("case", ESCAPES)
def test_reads_that_leave_the_skill_folder_are_refused(ctx, skill, outside, case) -> None:
    outcome = read(ctx, escape_paths(skill, outside)[case])

    assert (outcome.status, outcome.error) == ("refused", "outside_skill")
    assert outcome.attempts == 0
    text = json.dumps(outcome.observation)
    assert "top secret" not in text and "root:" not in text


@pytest.mark.parametrize(
    "path",
    ["../../outside/evil.sh", "scripts/evil_link.sh", "linked_dir/evil.sh", "references/up/../outside/evil.sh"],
)
def test_scripts_that_leave_the_skill_folder_are_refused_and_not_run(ctx, skill, outside, workspace, path) -> None:
    escape_paths(skill, outside)

    outcome = run(ctx, path)

    assert (outcome.status, outcome.error) == ("refused", "outside_skill")
    assert not (workspace / "pwned.txt").exists()


def test_a_skill_folder_reached_through_a_symlink_and_links_within_it_work(tmp_path, workspace, skill) -> None:
    alias = tmp_path / "installed"
    alias.symlink_to(skill)
    (skill / "references" / "alias.md").symlink_to("guide.md")
    (skill / "docs").symlink_to("references")
    ctx = make_ctx(tmp_path, workspace, demo=alias)

    for path in ("references/guide.md", "references/alias.md", "docs/guide.md"):
        outcome = read(ctx, path)
        assert outcome.status == "ok", path
        assert outcome.observation["path"] == "references/guide.md"


def test_missing_folders_and_binary_files_fail_with_clear_codes(ctx, skill) -> None:
    (skill / "assets").mkdir()
    (skill / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (skill / "assets" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (skill / "assets" / "nul.txt").write_bytes(b"text\x00more")

    assert read(ctx, "references/nope.md").error == "not_found"
    assert read(ctx, "SKILL.md/inside").error == "not_found"
    assert read(ctx, "references").error == "not_a_file"
    assert read(ctx, ".").error == "not_a_file"
    for name in ("logo.png", "latin1.txt", "nul.txt"):
        outcome = read(ctx, f"assets/{name}")
        assert outcome.error == "not_text", name
        assert outcome.observation["details"]["size"] == (skill / "assets" / name).stat().st_size


def test_a_path_with_a_nul_character_is_an_invalid_argument(ctx) -> None:
    assert read(ctx, "SKILL.md\x00.txt").status == "invalid_arguments"
    assert run(ctx, "scripts/x.sh\x00").status == "invalid_arguments"
    assert run(ctx, "scripts/x.sh", "a\x00b").status == "invalid_arguments"


# --- run_skill_script ----------------------------------------------------------------------------------


def test_running_a_script_needs_approval(ctx, skill, workspace) -> None:
    write_script(skill, "touch.sh", "touch ran.txt\n")
    outcome = execute(RunSkillScript(), ctx, {"skill": "demo", "script": "scripts/touch.sh"})
    assert (outcome.status, outcome.error) == ("refused", "approval_required")
    assert not (workspace / "ran.txt").exists()


def test_a_python_script_runs_in_the_workspace_and_reads_a_csv_there(ctx, skill, workspace) -> None:
    (workspace / "data").mkdir()
    (workspace / "data" / "sales.csv").write_text("region,amount\nnorth,10\nsouth,32\n")
    write_script(
        skill,
        "total.py",
        "import csv, os, sys\n"
        "rows = list(csv.DictReader(open(sys.argv[1])))\n"
        "print(os.getcwd())\n"
        "print('total', sum(int(r['amount']) for r in rows))\n",
    )

    outcome = run(ctx, "scripts/total.py", "data/sales.csv")

    assert outcome.status == "ok" and outcome.attempts == 1
    assert outcome.observation["stdout"] == f"{workspace.resolve()}\ntotal 42\n"
    assert outcome.observation["exit_code"] == 0 and outcome.observation["stderr"] == ""
    # The script's code never enters the context, and it is no workspace artifact.
    assert "DictReader" not in json.dumps(outcome.observation)
    assert outcome.artifact_events == ()


def test_a_shell_script_gets_each_argument_as_it_is(ctx, skill) -> None:
    write_script(skill, "args.sh", 'echo "count=$#"; for a in "$@"; do printf "[%s]\\n" "$a"; done; exit 3\n')
    tricky = ["two words", "$HOME", "; touch pwned", "*", ""]

    outcome = run(ctx, "scripts/args.sh", *tricky)

    assert outcome.status == "ok", "a non-zero exit code is a result"
    assert outcome.observation["exit_code"] == 3
    assert outcome.observation["stdout"] == "count=5\n" + "".join(f"[{a}]\n" for a in tricky)


def test_an_executable_runs_through_its_shebang(ctx, skill) -> None:
    write_script(skill, "hello", "#!/bin/sh\necho hello from $0\n", mode=0o755)
    outcome = run(ctx, "scripts/hello")
    assert outcome.observation["stdout"] == f"hello from {skill.resolve() / 'scripts' / 'hello'}\n"


def test_a_file_that_is_not_a_script_is_refused(ctx, skill) -> None:
    write_script(skill, "data.txt", "echo should not run\n")
    write_script(skill, "tool.rb", "puts 1\n")

    for script in ("scripts/data.txt", "scripts/tool.rb", "references/guide.md", "SKILL.md"):
        outcome = run(ctx, script)
        assert (outcome.status, outcome.error) == ("refused", "not_runnable"), script
    assert run(ctx, "scripts/missing.py").error == "not_found"
    assert run(ctx, "scripts").error == "not_a_file"


def test_a_script_sees_skill_dir_but_no_secrets(ctx, skill, workspace, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-0123456789abcdef")
    monkeypatch.setenv("AGENTD_SECRET", "agentd-internal")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    # The environment goes to a file: printed, it can outgrow what an observation shows (under make,
    # say, which adds its own variables), and the test would then read a summary instead.
    write_script(skill, "env.py", "import json, os\nopen('env.json', 'w').write(json.dumps(dict(os.environ)))\n")

    outcome = run(ctx, "scripts/env.py")

    assert outcome.observation["exit_code"] == 0, outcome.observation
    seen = json.loads((workspace / "env.json").read_text())
    assert seen["SKILL_DIR"] == str(skill.resolve())
    assert seen["HARMLESS_SETTING"] == "visible"
    text = json.dumps(seen)
    for leaked in ("OPENAI_API_KEY", "sk-fake", "AGENTD_", "agentd-internal"):
        assert leaked not in text


def test_a_script_sees_no_stdin(ctx, skill) -> None:
    write_script(skill, "stdin.py", "import sys\nprint(repr(sys.stdin.read()))\n")
    assert run(ctx, "scripts/stdin.py").observation["stdout"] == "''\n"


def test_a_timeout_kills_the_script_and_what_it_started(ctx, skill, workspace) -> None:
    write_script(skill, "hang.sh", "echo $$ > sh.pid\nsleep 30 &\necho $! > bg.pid\necho started\nwait\n")

    started = time.monotonic()
    outcome = run(ctx, "scripts/hang.sh", timeout_s=0.5)
    elapsed = time.monotonic() - started

    assert (outcome.status, outcome.error) == ("timeout", "timeout")
    assert outcome.attempts == 1, "a script is not idempotent, so it is never retried"
    assert elapsed < 20, "the script's 30 s sleep ran on past the timeout"
    assert "started" in outcome.observation["details"]["stdout_tail"]
    for name in ("sh.pid", "bg.pid"):
        pid = int((workspace / name).read_text())
        assert process_gone(pid), f"{name} ({pid}) survived the timeout"


def test_a_megabyte_of_output_is_capped_keeping_start_end_and_byte_counts(ctx, skill) -> None:
    write_script(
        skill,
        "loud.py",
        "import sys\n"
        "sys.stdout.write('START' + 'x' * 1_000_000 + 'END')\n"
        "sys.stderr.write('err-start' + 'e' * 1_000_000 + 'err-end')\n",
    )
    cap = 16 * 1024

    outcome = run(ctx, "scripts/loud.py")

    out, err = outcome.output.stdout, outcome.output.stderr
    assert outcome.output.stdout_bytes == 5 + 1_000_000 + 3
    assert outcome.output.stderr_bytes == 9 + 1_000_000 + 7
    assert out.startswith("START") and out.endswith("END")
    assert err.startswith("err-start") and err.endswith("err-end")
    assert f"[... {1_000_008 - cap} bytes omitted ...]" in out
    assert len(out) < cap + 100 and len(err) < cap + 100
    # The observation keeps the counts and the tails; the rest waits in the artifact store.
    obs = outcome.observation
    assert obs["truncated"] is True and obs["stdout_bytes"] == 1_000_008
    assert obs["stdout_tail"].endswith("END") and obs["stderr_tail"].endswith("err-end")


@pytest.mark.parametrize(
    "args",
    [["x"] * 33, ["y" * 1001], [1, 2]],
    ids=["too_many", "too_long", "not_strings"],
)
def test_script_arguments_are_bounded(ctx, skill, workspace, args) -> None:
    write_script(skill, "touch.sh", "touch ran.txt\n")
    arguments = {"skill": "demo", "script": "scripts/touch.sh", "args": args}
    outcome = execute(RunSkillScript(), ctx, arguments, approved=True)
    assert outcome.status == "invalid_arguments"
    assert not (workspace / "ran.txt").exists()


def test_register_skill_tools_adds_both_with_their_contracts() -> None:
    registry = ToolRegistry()
    register_skill_tools(registry)

    assert registry.names() == ["read_skill_file", "run_skill_script"]
    reader, runner = registry.definitions()
    assert (reader["effects"], reader["idempotent"], reader["needs_approval"]) == (["read"], True, False)
    assert (runner["effects"], runner["idempotent"], runner["needs_approval"]) == (["external"], False, True)
    assert reader["scope"] == "skill" and runner["timeout_s"] == 60
    assert {"skill_not_active", "outside_skill", "not_text"} <= set(reader["errors"])
    assert {"skill_not_active", "outside_skill", "not_runnable", "timeout"} <= set(runner["errors"])
    schema_grammar(
        proposal.schema({t.name: inline_schema(t.contract.input_model) for t in registry.select()}, skills=[])
    )


# --- the bundled skills ---------------------------------------------------------------------------------


@pytest.fixture
def bundled(tmp_path: Path, workspace: Path) -> ToolContext:
    names = ("api-key-runbook", "csv-summary", "git-changes")
    return make_ctx(tmp_path, workspace, **{name: BUNDLED / name for name in names})


def test_each_bundled_skill_names_its_folder_and_says_what_and_when(bundled) -> None:
    for name in ("api-key-runbook", "csv-summary", "git-changes"):
        text = read(bundled, "SKILL.md", skill=name).output.text
        assert text.startswith(f"---\nname: {name}\ndescription: ")
        assert "Use it " in text.split("\n---\n", 1)[0]


def test_the_api_key_runbook_pre_approves_only_read_only_tools_and_ships_its_table(bundled) -> None:
    skill_md = read(bundled, "SKILL.md", skill="api-key-runbook").output.text
    assert "\nallowed-tools: check_api_key_status search_incidents\n" in skill_md
    table = read(bundled, "references/decision-table.md", skill="api-key-runbook")
    assert table.status == "ok"
    assert "runbook/api-keys@v7#revoked-keys" in table.output.text


def test_csv_summary_describes_a_real_csv(bundled, workspace) -> None:
    (workspace / "data").mkdir()
    (workspace / "data" / "sales.csv").write_text(
        "region,product,price,qty\n"
        "north,apple,1.5,3\n"
        "south,pear,10,\n"
        "north,apple,2.25,7\n"
        'north,"fig, dried",7.75,1\n'
    )

    outcome = run(bundled, "scripts/summarize.py", "data/sales.csv", skill="csv-summary")

    assert outcome.observation["exit_code"] == 0, outcome.observation["stderr"]
    assert outcome.observation["stdout"].splitlines() == [
        "file: data/sales.csv",
        "rows: 4, columns: 4 (delimiter ',')",
        "numeric columns:",
        "  price: count 4, min 1.5, max 10, mean 5.375",
        "  qty: count 3 (1 missing), min 1, max 7, mean 3.66667",
        "text columns:",
        '  region: 2 distinct; top: "north" (3), "south" (1)',
        '  product: 3 distinct; top: "apple" (2), "pear" (1), "fig, dried" (1)',
    ]


def test_csv_summary_detects_semicolons_and_quoted_newlines(bundled, workspace) -> None:
    (workspace / "scores.csv").write_text('name;note;score\nAnn;"two\nlines";3\nBob;x;4e2\n')
    out = run(bundled, "scripts/summarize.py", "scores.csv", skill="csv-summary").observation["stdout"]
    assert "rows: 2, columns: 3 (delimiter ';')" in out
    assert "score: count 2, min 3, max 400, mean 201.5" in out


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.csv", None, "no such file: missing.csv"),
        ("blob.csv", b"\x89PNG\r\n\x1a\n\xff\xfe", "blob.csv is not a CSV file: it is not UTF-8 text"),
        ("empty.csv", b"", "empty.csv is not a CSV file: it is empty"),
        ("prose.txt", b"Dear team, hello\nsee you\n", "record 2 has 1 field, the header has 2 fields"),
        ("../outside.csv", b"a,b\n1,2\n", "../outside.csv is outside the workspace"),
    ],
)
def test_csv_summary_fails_in_one_line_with_exit_code_2(bundled, workspace, name, content, message) -> None:
    if content is not None:
        (workspace / name).write_bytes(content)

    outcome = run(bundled, "scripts/summarize.py", name, skill="csv-summary")

    assert outcome.observation["exit_code"] == 2
    assert outcome.observation["stdout"] == ""
    stderr = outcome.observation["stderr"]
    assert stderr.count("\n") == 1 and stderr.startswith("summarize.py: error: ") and message in stderr


def git(workspace: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=workspace, check=True, capture_output=True,
    )


def test_git_changes_reports_status_and_recent_commits_of_a_repository(bundled, workspace) -> None:
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "app.py").write_text("print(1)\n")
    git(workspace, "add", "app.py")
    git(workspace, "commit", "-q", "-m", "Add the app")
    (workspace / "app.py").write_text("print(2)\n")
    (workspace / "notes.txt").write_text("todo\n")

    outcome = run(bundled, "scripts/changes.sh", skill="git-changes")

    out = outcome.observation["stdout"]
    assert outcome.observation["exit_code"] == 0, outcome.observation["stderr"]
    assert "git repository, branch main" in out
    status = out.split("status (git status --short):\n", 1)[1].split("\n\n", 1)[0]
    assert status.splitlines() == [" M app.py", "?? notes.txt"]
    (commit,) = out.split("last 5 commits:\n", 1)[1].splitlines()
    assert commit.endswith(" Add the app")


def test_git_changes_lists_the_newest_files_of_a_plain_folder(bundled, workspace, tmp_path, monkeypatch) -> None:
    # Whatever surrounds the temporary folder, git must not find a repository above the workspace.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (workspace / "sub").mkdir()
    for age, name in enumerate(["newest.txt", "sub/middle.txt", "oldest.txt"]):
        path = workspace / name
        path.write_text(name)
        then = time.time() - 100 * (age + 1)
        os.utime(path, (then, then))

    outcome = run(bundled, "scripts/changes.sh", skill="git-changes")

    assert outcome.observation["stdout"].splitlines() == [
        "not a git repository; the 10 most recently modified files, newest first:",
        "newest.txt",
        "sub/middle.txt",
        "oldest.txt",
    ]


def test_git_changes_lists_at_most_ten_files(bundled, workspace, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for i in range(15):
        (workspace / f"f{i:02}.txt").write_text("x")
        os.utime(workspace / f"f{i:02}.txt", (1_000_000 + i, 1_000_000 + i))

    lines = run(bundled, "scripts/changes.sh", skill="git-changes").observation["stdout"].splitlines()

    assert lines[1:] == [f"f{i:02}.txt" for i in range(14, 4, -1)]

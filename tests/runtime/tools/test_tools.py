"""Tools end to end: contracts, registry, executor, the file tools and the shell, on real files and processes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.agent import proposal
from runtime.artifacts import ArtifactStore
from runtime.errors import ToolError
from runtime.inference.grammar import schema_grammar
from runtime.inference.model_file import smoke_model_path
from runtime.tools import (
    FACT_ARTIFACT_REFS,
    Effect,
    ListFiles,
    ReadArtifact,
    ReadFile,
    Shell,
    Tool,
    ToolContext,
    ToolContract,
    ToolFailure,
    ToolRefused,
    ToolRegistry,
    WriteFile,
    builtin_registry,
    execute,
    recording,
    snapshot,
)
from runtime.tools.schema import inline_schema
from store.events import ArtifactRead, FileChanged, ToolCallExecuted
from tests.helpers import REPO, process_gone


@pytest.fixture
def ctx(tmp_path: Path, workspace: Path) -> ToolContext:
    return ToolContext(
        task_id="task-1",
        tenant="acme",
        actor="agent",
        workspace=workspace,
        artifacts=ArtifactStore(tmp_path / "data" / "artifacts"),
    )


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- small tools that misbehave on purpose ------------------------------------------------------


class NArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int


class NOut(BaseModel):
    value: int = Field(ge=0)


class Probe(Tool[NArgs, NOut]):
    """Counts its runs; `behaviour` decides what each run does."""

    def __init__(self, behaviour, *, idempotent=True, timeout_s=2.0, name="probe") -> None:
        self.behaviour = behaviour
        self.runs = 0
        self.finished = threading.Event()
        self.contract = ToolContract(
            name=name,
            description="a test tool",
            input_model=NArgs,
            output_model=NOut,
            effects=[Effect.READ],
            idempotent=idempotent,
            scope="task",
            timeout_s=timeout_s,
        )

    def run(self, ctx, args):
        self.runs += 1
        try:
            return self.behaviour(self.runs, ctx, args)
        finally:
            self.finished.set()


def ok(run, ctx, args):
    return NOut(value=args.n)


# --- file tools: the workspace boundary -----------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside"
    target.mkdir()
    (target / "secret.txt").write_text("top secret\n")
    return target


def escape_paths(workspace: Path, outside: Path) -> dict[str, str]:
    (workspace / "etc").symlink_to("/etc")
    (workspace / "secret_link.txt").symlink_to(outside / "secret.txt")
    (workspace / "out_dir").symlink_to(outside)
    (workspace / "sub").mkdir()
    (workspace / "sub" / "up").symlink_to("../..")
    return {
        "dotdot": "../outside/secret.txt",
        "dotdot_inside": "sub/../../outside/secret.txt",
        "absolute": str(outside / "secret.txt"),
        "etc_absolute": "/etc/passwd",
        "symlink_to_etc": "etc/passwd",
        "symlink_file": "secret_link.txt",
        "symlinked_dir": "out_dir/secret.txt",
        "symlink_in_the_middle": "sub/up/outside/secret.txt",
    }


@pytest.mark.parametrize(
    "case",
    [
        "dotdot",
        "dotdot_inside",
        "absolute",
        "etc_absolute",
        "symlink_to_etc",
        "symlink_file",
        "symlinked_dir",
        "symlink_in_the_middle",
    ],
)
def test_reads_that_leave_the_workspace_are_refused(ctx, workspace, outside, case) -> None:
    path = escape_paths(workspace, outside)[case]

    outcome = execute(ReadFile(), ctx, {"path": path})

    assert outcome.status == "refused"
    assert outcome.error == "outside_workspace"
    assert outcome.observation["error"] == "outside_workspace"
    assert "top secret" not in json.dumps(outcome.observation)
    assert "root:" not in json.dumps(outcome.observation)
    assert outcome.artifact_events == () and outcome.attempts == 0


@pytest.mark.parametrize("case", ["symlink_file", "symlinked_dir", "dotdot", "absolute"])
def test_writes_that_leave_the_workspace_are_refused(ctx, workspace, outside, case) -> None:
    path = escape_paths(workspace, outside)[case]

    outcome = execute(WriteFile(), ctx, {"path": path, "content": "pwned"})

    assert (outcome.status, outcome.error) == ("refused", "outside_workspace")
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_writing_a_new_file_through_a_symlinked_dir_is_refused(ctx, workspace, outside) -> None:
    escape_paths(workspace, outside)
    outcome = execute(WriteFile(), ctx, {"path": "out_dir/new.txt", "content": "x"})
    assert outcome.status == "refused"
    assert not (outside / "new.txt").exists()


def test_listing_outside_is_refused(ctx, workspace, outside) -> None:
    escape_paths(workspace, outside)
    for path in ("..", "out_dir", str(outside)):
        assert execute(ListFiles(), ctx, {"path": path}).error == "outside_workspace"


def test_paths_inside_the_workspace_are_fine_however_they_are_spelled(ctx, workspace) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "a.txt").write_text("A\n")
    (workspace / "alias.txt").symlink_to("docs/a.txt")

    for path in ("docs/a.txt", str(workspace / "docs" / "a.txt"), "docs/../docs/./a.txt", "alias.txt"):
        outcome = execute(ReadFile(), ctx, {"path": path})
        assert outcome.status == "ok", path
        assert outcome.observation["path"] == "docs/a.txt"
        assert outcome.artifact_events == (ArtifactRead(path="docs/a.txt", sha256=sha(b"A\n"), size=2),)


def test_the_data_directory_inside_the_workspace_is_off_limits(tmp_path, workspace) -> None:
    data = workspace / ".agentd"
    (data / "artifacts").mkdir(parents=True)
    (data / "agentd.db").write_bytes(b"SQLite format 3\x00")
    (workspace / "a.txt").write_text("a")
    ctx = ToolContext("t", "acme", "agent", workspace, ArtifactStore(data / "artifacts"), protected=(data,))

    assert execute(ReadFile(), ctx, {"path": ".agentd/agentd.db"}).error == "protected_path"
    assert execute(WriteFile(), ctx, {"path": ".agentd/agentd.db", "content": ""}).error == "protected_path"
    assert execute(WriteFile(), ctx, {"path": ".agentd/artifacts/x", "content": ""}).error == "protected_path"
    listing = execute(ListFiles(), ctx, {})
    assert [e["path"] for e in listing.observation["entries"]] == ["a.txt"]


# --- file tools: what they do and record ------------------------------------------------------------


def test_read_file_returns_text_and_records_its_hash(ctx, workspace) -> None:
    data = "line one\nline two\nno newline at end".encode()
    (workspace / "notes.txt").write_bytes(data)

    outcome = execute(ReadFile(), ctx, {"path": "notes.txt"})

    assert outcome.status == "ok" and outcome.attempts == 1
    assert outcome.observation == {
        "tool": "read_file",
        "status": "ok",
        "path": "notes.txt",
        "size": len(data),
        "sha256": sha(data),
        "lines": 3,
        "data_rows": None,
        "columns": None,
        "sums_by": None,
        "outline": None,
        "content": data.decode(),
    }
    assert outcome.artifact_events == (ArtifactRead(path="notes.txt", sha256=sha(data), size=len(data)),)
    assert outcome.artifact_ref is None


def test_write_file_creates_folders_records_the_write_and_is_idempotent(ctx, workspace) -> None:
    content = "print('hi')\n"
    args = {"path": "src/pkg/main.py", "content": content}
    paths = recording.scope(WriteFile().contract, args)

    recorded = []
    for _ in range(2):
        before = snapshot.take(ctx, paths)
        outcome = execute(WriteFile(), ctx, args)
        recorded.append((outcome, recording.compare(ctx, before, "c1", snapshot.Limit())[0]))
    (first, created), (second, again) = recorded

    assert (workspace / "src/pkg/main.py").read_text() == content
    assert first.status == second.status == "ok"
    assert (first.observation["created"], first.observation["changed"]) == (True, True)
    assert (second.observation["created"], second.observation["changed"]) == (False, False)
    assert created == [FileChanged(
        call_id="c1", path="src/pkg/main.py", before_sha256=None, after_sha256=sha(content.encode()),
        before_size=None, after_size=len(content.encode()), mode=0o644,
    )]
    assert again == []
    assert not [p for p in (workspace / "src/pkg").iterdir() if p.name.endswith(".tmp")]


def test_write_file_keeps_the_mode_of_the_file_it_replaces(ctx, workspace) -> None:
    script = workspace / "run.sh"
    script.write_text("old")
    script.chmod(0o755)
    execute(WriteFile(), ctx, {"path": "run.sh", "content": "new"})
    assert script.read_text() == "new" and script.stat().st_mode & 0o777 == 0o755


def test_binary_missing_and_directory_reads_fail_with_clear_codes(ctx, workspace) -> None:
    (workspace / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (workspace / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (workspace / "dir").mkdir()

    assert execute(ReadFile(), ctx, {"path": "blob.bin"}).error == "binary_file"
    assert execute(ReadFile(), ctx, {"path": "latin1.txt"}).error == "binary_file"
    assert execute(ReadFile(), ctx, {"path": "nope.txt"}).error == "not_found"
    assert execute(ReadFile(), ctx, {"path": "dir"}).error == "is_directory"
    assert execute(WriteFile(), ctx, {"path": "dir", "content": "x"}).error == "is_directory"


def test_list_files_reports_kinds_without_following_links(ctx, workspace, outside) -> None:
    (workspace / "b.txt").write_text("bb")
    (workspace / "a_dir").mkdir()
    (workspace / "c_link").symlink_to(outside)

    outcome = execute(ListFiles(), ctx, {})

    assert outcome.status == "ok"
    assert outcome.observation["entries"] == [
        {"path": "a_dir", "kind": "dir", "size": None},
        {"path": "b.txt", "kind": "file", "size": 2},
        {"path": "c_link", "kind": "link", "size": None},
    ]
    assert outcome.observation["count"] == 3


def test_list_files_gives_paths_that_read_file_takes_as_they_are(ctx, workspace) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "faq.md").write_text("Q?")

    [entry] = execute(ListFiles(), ctx, {"path": "docs"}).observation["entries"]

    assert entry["path"] == "docs/faq.md"
    assert execute(ReadFile(), ctx, {"path": entry["path"]}).observation["content"] == "Q?"


# --- masking and read_artifact ------------------------------------------------------------------------


def test_a_long_read_is_masked_and_the_full_text_can_be_read_back(ctx, workspace) -> None:
    text = "".join(f"line {i}: {'x' * 40}\n" for i in range(300))
    (workspace / "big.log").write_text(text)

    outcome = execute(ReadFile(), ctx, {"path": "big.log"})

    obs = outcome.observation
    assert outcome.status == "ok"
    assert "content" not in obs
    assert obs["truncated"] is True and obs["full_chars"] > 2000
    assert obs["artifact_ref"] == outcome.artifact_ref and outcome.artifact_ref.startswith("artifact://sha256/")
    assert {k: obs[k] for k in ("path", "size", "sha256", "lines")} == {
        "path": "big.log", "size": len(text), "sha256": sha(text.encode()), "lines": 300,
    }
    assert len(json.dumps(obs)) < 1000
    assert json.loads(ctx.artifacts.get(outcome.artifact_ref))["content"] == text
    assert outcome.output.content == text
    # The trail still names the file that was read, masked or not.
    assert outcome.artifact_events[0].sha256 == sha(text.encode())


def test_a_csv_files_records_are_counted_by_code_even_when_its_content_is_masked(ctx, workspace) -> None:
    # Asked how many orders a CSV held, the default model answered with the line count, header included.
    (workspace / "orders.csv").write_text('id,note\n1,plain\n2,"two\nlines"\n\n3,last\n')
    small = execute(ReadFile(), ctx, {"path": "orders.csv"}).observation
    assert (small["lines"], small["data_rows"]) == (6, 3)
    (workspace / "big.csv").write_text("id,amount\n" + "".join(f"{i},{i}.50\n" for i in range(400)))
    big = execute(ReadFile(), ctx, {"path": "big.csv"}).observation
    assert big["truncated"] is True and big["data_rows"] == 400
    assert big["columns"][0]["sum"] == "80000.00", "a masked table keeps its figures"
    assert execute(ReadFile(), ctx, {"path": "orders.csv"}).output.data_rows == 3


def test_the_mask_limit_is_configurable(ctx, workspace) -> None:
    (workspace / "small.txt").write_text("x" * 300)
    assert "content" in execute(ReadFile(), ctx, {"path": "small.txt"}).observation
    assert execute(ReadFile(), ctx, {"path": "small.txt"}, mask_chars=100).observation["truncated"] is True


def test_read_artifact_pages_through_this_tasks_artifacts_only(ctx, workspace) -> None:
    (workspace / "big.txt").write_text("y" * 5000)
    ref = execute(ReadFile(), ctx, {"path": "big.txt"}).artifact_ref
    full = ctx.artifacts.get(ref).decode()

    refused = execute(ReadArtifact(), ctx, {"ref": ref})
    assert (refused.status, refused.error) == ("refused", "artifact_not_in_scope")

    own = ctx.with_facts(**{FACT_ARTIFACT_REFS: frozenset({ref})})
    pages, offset = [], 0
    while offset is not None:
        outcome = execute(ReadArtifact(), own, {"ref": ref, "offset": offset})
        assert outcome.status == "ok" and "artifact_ref" not in outcome.observation
        pages.append(outcome.observation["content"])
        offset = outcome.observation["next_offset"]
    assert "".join(pages) == full and len(pages) > 1

    assert execute(ReadArtifact(), own, {"ref": "artifact://sha256/../../etc"}).status == "invalid_arguments"


# --- registry ---------------------------------------------------------------------------------------


def test_an_unknown_tool_is_named_and_a_near_one_suggested() -> None:
    registry = builtin_registry()
    with pytest.raises(ToolError) as caught:
        registry.get("read_log")
    message = str(caught.value)
    assert "'read_log'" in message and "did you mean read_file" in message
    assert isinstance(caught.value, ToolFailure) and caught.value.code == "unknown_tool"
    assert caught.value.details["did_you_mean"][0] == "read_file"
    with pytest.raises(ToolError, match="read_log"):
        registry.definitions(["read_file", "read_log"])


def test_definitions_are_byte_identical_whatever_the_registration_order() -> None:
    tools = [ReadFile(), WriteFile(), ListFiles(), Shell(), ReadArtifact()]
    one = ToolRegistry(tools)
    other = ToolRegistry(reversed([ReadFile(), WriteFile(), ListFiles(), Shell(), ReadArtifact()]))

    assert one.definitions_json() == other.definitions_json()
    assert one.definitions_json(["write_file", "read_file"]) == other.definitions_json(["read_file", "write_file"])
    assert [d["name"] for d in one.definitions()] == sorted(t.contract.name for t in tools)


def test_definitions_are_byte_identical_across_processes() -> None:
    script = "from runtime.tools import builtin_registry; print(builtin_registry().definitions_json())"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True, text=True, check=True, cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    assert outputs.pop().strip() == builtin_registry().definitions_json()


def test_definitions_tell_the_model_what_it_needs() -> None:
    (shell,) = builtin_registry().definitions(["shell"])
    assert shell["effects"] == ["external"]
    assert shell["idempotent"] is False and shell["needs_approval"] is True
    assert shell["input_schema"]["required"] == ["command"]
    assert "timeout" in shell["errors"]
    assert "$ref" not in json.dumps(builtin_registry().definitions())


def tool_schema(registry: ToolRegistry, names=None) -> dict:
    """The proposal schema the agent loop samples under, over these tools."""
    return proposal.schema({t.name: inline_schema(t.contract.input_model) for t in registry.select(names)}, skills=[])


def test_the_proposal_schema_compiles_to_a_llama_cpp_grammar() -> None:
    registry = builtin_registry()
    schema = tool_schema(registry)
    # Tool arguments inlined; the only reference is every action's to the one thought definition.
    text = json.dumps(schema["anyOf"]).replace('{"$ref": "#/$defs/thought"}', "")

    assert "$ref" not in text and "$defs" not in text
    branches = {b["properties"]["tool"]["const"]: b for b in schema["anyOf"] if "tool" in b["properties"]}
    assert sorted(branches) == registry.names()
    assert branches["write_file"]["properties"]["arguments"]["required"] == ["path", "content"]
    grammar = schema_grammar(schema)
    assert "root ::=" in grammar
    # llama.cpp's converter unrolls length bounds; big ones (a file's content) must not reach it.
    assert "4096" not in grammar and len(grammar) < 40_000

    only = tool_schema(registry, ["read_file", "list_files"])
    assert [b["properties"]["tool"]["const"] for b in only["anyOf"] if "tool" in b["properties"]] == [
        "list_files", "read_file",
    ]


def test_llama_cpp_itself_parses_the_proposal_grammar() -> None:
    import llama_cpp
    from llama_cpp import Llama

    model_path = smoke_model_path()
    grammar = schema_grammar(tool_schema(builtin_registry()))
    model = Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(model.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    assert sampler, "llama.cpp rejected the grammar"
    llama_cpp.llama_sampler_free(sampler)


# --- executor ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, where",
    [
        ({"n": "5"}, "n: Input should be a valid integer"),
        ({"n": 1.5}, "n: Input should be a valid integer"),
        ({"n": None}, "n: Input should be a valid integer"),
        ({}, "n: Field required"),
        ({"n": 1, "m": 2}, "m: Extra inputs are not permitted"),
        (["n", 1], "arguments must be a JSON object"),
        ({"n": object()}, "arguments are not JSON data"),
    ],
)
def test_bad_arguments_are_reported_and_nothing_runs(ctx, args, where) -> None:
    probe = Probe(ok)

    outcome = execute(probe, ctx, args)

    assert (outcome.status, outcome.error) == ("invalid_arguments", "invalid_arguments")
    assert where in outcome.observation["message"]
    assert probe.runs == 0 and outcome.attempts == 0 and outcome.output is None


def test_a_missing_argument_is_never_filled_in(ctx, workspace) -> None:
    (workspace / "a.txt").write_text("a")
    outcome = execute(WriteFile(), ctx, {"path": "a.txt"})
    assert outcome.status == "invalid_arguments"
    assert outcome.observation["message"] == "content: Field required"
    assert (workspace / "a.txt").read_text() == "a"


def test_a_crashing_tool_reports_a_code_not_a_traceback(ctx) -> None:
    def crash(run, ctx, args):
        raise ZeroDivisionError("division by zero")

    outcome = execute(Probe(crash, idempotent=False), ctx, {"n": 1})

    assert outcome.status == "error"
    assert outcome.observation == {
        "tool": "probe", "status": "error", "error": "unexpected_error",
        "message": "ZeroDivisionError: division by zero",
    }
    assert "Traceback" not in json.dumps(outcome.observation)


def test_a_tool_failure_keeps_its_own_code_and_details(ctx) -> None:
    def quota(run, ctx, args):
        raise ToolFailure("quota_exceeded", "the account is over its quota", {"limit": 10})

    outcome = execute(Probe(quota, idempotent=False), ctx, {"n": 1})
    assert outcome.observation["error"] == "quota_exceeded"
    assert outcome.observation["details"] == {"limit": 10}


def test_a_hanging_tool_times_out_without_blocking_the_caller(ctx) -> None:
    release = threading.Event()

    def hang(run, ctx, args):
        release.wait(10)  # ignores the cancel flag, like code stuck in a library call
        return NOut(value=1)

    probe = Probe(hang, idempotent=False, timeout_s=0.3)
    started = time.monotonic()
    outcome = execute(probe, ctx, {"n": 1})
    elapsed = time.monotonic() - started
    try:
        assert outcome.status == "timeout" and outcome.error == "timeout"
        assert elapsed < 0.3 + 0.5 + 0.5
        assert not probe.finished.is_set(), "execute waited for the tool"
        assert probe.runs == 1
    finally:
        release.set()


def test_a_cooperative_tool_sees_the_cancel_flag(ctx) -> None:
    seen = threading.Event()

    def polite(run, ctx, args):
        while not ctx.should_stop():
            time.sleep(0.01)
        seen.set()
        raise ToolFailure("timeout", "stopped")

    outcome = execute(Probe(polite, idempotent=False, timeout_s=0.2), ctx, {"n": 1})
    assert outcome.status == "timeout"
    assert seen.is_set()


def test_an_idempotent_tool_that_fails_once_is_retried(ctx) -> None:
    def flaky(run, ctx, args):
        if run == 1:
            raise OSError("connection reset")
        return NOut(value=args.n)

    probe = Probe(flaky, idempotent=True)
    outcome = execute(probe, ctx, {"n": 7})

    assert outcome.status == "ok" and outcome.output == NOut(value=7)
    assert probe.runs == outcome.attempts == 2
    assert outcome.observation == {"tool": "probe", "status": "ok", "value": 7, "attempts": 2}


def test_an_idempotent_tool_that_times_out_is_retried_once(ctx) -> None:
    def slow(run, ctx, args):
        ctx.cancelled.wait(5)
        raise ToolFailure("timeout", "stopped")

    probe = Probe(slow, idempotent=True, timeout_s=0.2)
    outcome = execute(probe, ctx, {"n": 1})
    assert outcome.status == "timeout" and probe.runs == outcome.attempts == 2


def test_a_tool_that_is_not_idempotent_is_not_retried(ctx) -> None:
    def flaky(run, ctx, args):
        if run == 1:
            raise OSError("connection reset")
        return NOut(value=1)

    probe = Probe(flaky, idempotent=False)
    outcome = execute(probe, ctx, {"n": 1})

    assert outcome.status == "error" and probe.runs == outcome.attempts == 1
    assert outcome.observation["message"] == "OSError: connection reset"


class ListOut(BaseModel):
    items: list[str] = Field(min_length=1, description="never empty")
    price: float


class Lister(Tool[NArgs, ListOut]):
    def __init__(self, items, price=1.0) -> None:
        self.items, self.price = items, price
        self.contract = ToolContract(
            name="lister", description="lists", input_model=NArgs, output_model=ListOut,
            effects=[Effect.READ], idempotent=False, scope="task", timeout_s=2,
        )

    def run(self, ctx, args):
        return {"items": self.items, "price": self.price}

    def check(self, output):
        if output.price <= 0:
            raise ToolFailure("bad_price", f"price {output.price} is not above zero")


@pytest.mark.parametrize(
    "tool, detail",
    [
        (Lister([]), "items: List should have at least 1 item"),
        (Lister(["a"], price=0), "price 0.0 is not above zero"),
    ],
)
def test_broken_postconditions_are_reported(ctx, tool, detail) -> None:
    outcome = execute(tool, ctx, {"n": 1})
    assert (outcome.status, outcome.error) == ("error", "postcondition_failed")
    assert detail in outcome.observation["message"]
    assert outcome.output is None


def test_a_tool_building_an_invalid_result_fails_its_postcondition(ctx) -> None:
    outcome = execute(Probe(lambda run, ctx, args: NOut(value=-1), idempotent=False), ctx, {"n": 1})
    assert outcome.error == "postcondition_failed" and "value" in outcome.observation["message"]


class AccountArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account_id: str


class AccountStatus(Tool[AccountArgs, NOut]):
    """Checks the account against trusted state, never against what the model claims."""

    def __init__(self) -> None:
        self.runs = 0
        self.contract = ToolContract(
            name="check_account", description="account status", input_model=AccountArgs, output_model=NOut,
            effects=[Effect.READ], idempotent=True, scope="tenant", timeout_s=2,
        )

    def authorize(self, ctx, args):
        owner = ctx.facts["account_owners"].get(args.account_id)
        if owner != ctx.tenant:
            raise ToolRefused("other_tenant", f"account {args.account_id} is not in this tenant's scope")

    def run(self, ctx, args):
        self.runs += 1
        return NOut(value=1)


def test_authorize_refuses_another_tenants_resource_before_running(ctx) -> None:
    tool = AccountStatus()
    scoped = ctx.with_facts(account_owners={"A-1": "acme", "A-2": "globex"})

    assert execute(tool, scoped, {"account_id": "A-1"}).status == "ok"
    refused = execute(tool, scoped, {"account_id": "A-2"})
    assert (refused.status, refused.error) == ("refused", "other_tenant")
    assert tool.runs == 1
    with pytest.raises(TypeError):
        scoped.facts["account_owners"] = {}  # type: ignore[index]


def test_an_outcome_becomes_a_tool_call_executed_event(ctx) -> None:
    good = execute(Probe(ok), ctx, {"n": 3}).executed("call-1")
    bad = execute(Probe(ok), ctx, {"n": "3"}).executed("call-2")
    assert good.model_dump(exclude={"elapsed_s"}) == ToolCallExecuted(
        call_id="call-1", tool="probe", status="ok", attempts=1,
        observation={"tool": "probe", "status": "ok", "value": 3},
    ).model_dump(exclude={"elapsed_s"})
    assert bad.status == bad.observation["status"] == "invalid_arguments" and bad.attempts == 0


def test_contracts_reject_loose_inputs_and_shadowing_outputs() -> None:
    class Loose(BaseModel):
        n: int

    class Shadow(BaseModel):
        status: str

    base = dict(name="x", description="d", effects=[], idempotent=True, scope="task", timeout_s=1)
    with pytest.raises(ValidationError, match="must forbid extra fields"):
        ToolContract(input_model=Loose, output_model=NOut, **base)
    with pytest.raises(ValidationError, match="clash"):
        ToolContract(input_model=NArgs, output_model=Shadow, **base)
    with pytest.raises(ValidationError, match="not output fields"):
        ToolContract(input_model=NArgs, output_model=NOut, summary_fields=("nope",), **base)
    with pytest.raises(ValidationError, match="adds names an argument the tool does not take: nope"):
        ToolContract(input_model=NArgs, output_model=NOut, adds="nope", **base)


# --- shell ------------------------------------------------------------------------------------------------


def shell(ctx, command, **kw) -> tuple:
    tool = Shell(**kw)
    return tool, execute(tool, ctx, {"command": command}, approved=True)


def test_shell_needs_approval(ctx, workspace) -> None:
    outcome = execute(Shell(), ctx, {"command": "touch ran"})
    assert (outcome.status, outcome.error) == ("refused", "approval_required")
    assert not (workspace / "ran").exists()


def test_shell_runs_in_the_workspace_and_reports_the_exit_code(ctx, workspace) -> None:
    _, outcome = shell(ctx, "pwd; echo oops >&2; exit 3")
    assert outcome.status == "ok"
    assert outcome.observation["exit_code"] == 3
    assert outcome.observation["stdout"] == f"{os.path.realpath(workspace)}\n"
    assert outcome.observation["stderr"] == "oops\n"


def test_shell_hides_secrets_from_the_command(ctx, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "sk-fake-0123456789abcdef")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_fake")
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.setenv("AGENTD_DATA_DIR", "/somewhere")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")

    _, outcome = shell(ctx, "env")

    out = outcome.observation["stdout"]
    assert "HARMLESS_SETTING=visible" in out
    for leaked in ("FAKE_API_KEY", "sk-fake", "GITHUB_TOKEN", "hunter2", "AGENTD_"):
        assert leaked not in out


def test_shell_timeout_kills_the_whole_process_group(ctx, workspace) -> None:
    started = time.monotonic()
    tool, outcome = shell(ctx, "echo $$ > sh.pid; sleep 30 & echo $! > bg.pid; echo started; wait", timeout_s=0.5)
    elapsed = time.monotonic() - started

    assert (outcome.status, outcome.error) == ("timeout", "timeout")
    assert outcome.attempts == 1, "the shell is not idempotent, so it is never retried"
    assert elapsed < 0.5 + 1.0
    assert "started" in outcome.observation["details"]["stdout_tail"]
    for name in ("sh.pid", "bg.pid"):
        pid = int((workspace / name).read_text())
        assert process_gone(pid), f"{name} ({pid}) survived the timeout"


def test_shell_does_not_leave_background_processes_behind(ctx, workspace) -> None:
    started = time.monotonic()
    _, outcome = shell(ctx, "sleep 30 & echo $! > bg.pid")
    assert outcome.status == "ok" and time.monotonic() - started < 3
    assert process_gone(int((workspace / "bg.pid").read_text()))


def test_shell_output_is_capped_keeping_head_and_tail(ctx) -> None:
    _, outcome = shell(ctx, "printf START; head -c 100000 /dev/zero | tr '\\0' x; printf END", output_cap=1000)

    out = outcome.output.stdout
    assert outcome.output.stdout_bytes == len("START") + 100_000 + len("END")
    assert out.startswith("START") and out.endswith("END")
    assert "bytes omitted" in out and len(out) < 1100


def test_long_shell_output_is_masked_but_keeps_the_tail(ctx) -> None:
    _, outcome = shell(ctx, "seq 1 2000; echo 'error: the build failed' >&2; exit 2")

    obs = outcome.observation
    assert obs["truncated"] is True and obs["exit_code"] == 2
    assert "stdout" not in obs and obs["stdout_tail"].endswith("2000\n")
    assert "the build failed" in obs["stderr_tail"]
    assert json.loads(ctx.artifacts.get(obs["artifact_ref"]))["stdout"].startswith("1\n2\n3\n")


def test_calling_by_name_turns_unknown_and_disallowed_tools_into_refusals(ctx, workspace) -> None:
    registry = builtin_registry()
    (workspace / "a.txt").write_text("a")

    unknown = registry.call("read_log", ctx, {"path": "a.txt"})
    assert (unknown.status, unknown.error) == ("refused", "unknown_tool")
    assert "read_file" in unknown.observation["message"]

    step = ["list_files", "read_file"]
    assert registry.call("read_file", ctx, {"path": "a.txt"}, allowed=step).status == "ok"
    blocked = registry.call("write_file", ctx, {"path": "a.txt", "content": "b"}, allowed=step)
    assert (blocked.status, blocked.error) == ("refused", "not_allowed")
    assert (workspace / "a.txt").read_text() == "a"
    # Suggestions come from the step's tools only.
    suggested = registry.call("write_fil", ctx, {}, allowed=step).observation["details"]["did_you_mean"]
    assert "write_file" not in suggested and set(suggested) <= set(step)


def test_a_tool_that_gives_up_at_its_deadline_just_before_the_join_is_a_timeout(ctx, monkeypatch) -> None:
    """On a busy machine a tool polling should_stop() can end a moment before join(timeout) returns;
    that is still a timeout, not an error of the tool's own."""
    from pydantic import BaseModel as Model

    class In(Model):
        model_config = {"extra": "forbid"}

    class Out(Model):
        value: int

    class GivesUpAtItsDeadline(Tool):
        contract = ToolContract(name="gives_up", description="stops at its deadline", input_model=In,
                                output_model=Out, effects=(), idempotent=False, scope="task", timeout_s=0.3)

        def run(self, call, args):
            while not call.should_stop():
                time.sleep(0.01)
            raise RuntimeError("stopped")

    # The join returns a little after the deadline, as it does when the machine runs the tool's
    # thread first: by then the tool has seen its time was up and ended.
    real_join = threading.Thread.join
    monkeypatch.setattr(threading.Thread, "join", lambda self, timeout=None: real_join(
        self, None if timeout is None else timeout + 0.2))

    outcome = execute(GivesUpAtItsDeadline(), ctx, {})

    assert outcome.status == "timeout", outcome.observation

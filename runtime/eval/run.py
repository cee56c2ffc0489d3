"""One eval run: a case as a real task, in a scratch data directory, a fresh store and workspace.

The layout of a run mirrors agentd's default one, where the data directory sits inside the folder a
task works on:

    <scratch>/                  {scratch}: what `copy:` copies to, and the `knowledge/` of the run
    <scratch>/workspace/        {workspace}: the task's workspace, with the case's `files:`
    <scratch>/workspace/.agentd {data_dir}: the run's database, artifacts and logs, which the tools refuse

The model is the caller's, loaded once and shared by every run; everything else (plugins, the store,
the environment a plugin reads at `register`) is made for the run and undone after it.
"""

from __future__ import annotations

import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

import anyio

from runtime import logs
from runtime.agent import plugins
from runtime.agent.loop import run_task
from runtime.config import Settings
from runtime.daemon.wiring import open_runtime
from runtime.eval import check
from runtime.eval.case import Case, CaseFileError
from runtime.eval.report import RunResult
from runtime.harness import undo
from runtime.harness.approvals import decide
from runtime.harness.jobs import TOOL_NAME as START_JOB
from runtime.harness.tasks import submit_task
from runtime.inference.model import Model
from runtime.skills.tools import register_skill_tools
from runtime.tools import changes
from store import NO_STREAM, EventStore
from store.errors import AgentdError
from store.events import ModelCalled
from store.ids import new_task_id

# Rounds of "run until it waits, decide the approval": a task that asks again and again is stopped
# here, waiting, rather than looping for ever.
MAX_APPROVAL_ROUNDS = 6

log = logs.get_logger("agentd.eval")


def preflight(case: Case) -> None:
    """What can be known wrong before anything runs: the profile and every tool the case names."""
    loaded = plugins.load([case.path(p) for p in case.plugins])
    register_skill_tools(loaded.tools)
    known = set(loaded.tools.names()) | {START_JOB}
    where = f"{case.source}: case {case.name!r}"
    profile = loaded.profiles.get(case.task_profile)
    if profile is None:
        raise CaseFileError(
            f"{where}: profile: no profile {case.task_profile!r}; loaded: {', '.join(sorted(loaded.profiles))}"
        )
    for field, names in (
        ("required_tools", case.required_tool_names),
        ("forbidden_tools", case.forbidden_tools),
        ("approvals", tuple(case.approvals)),
    ):
        for name in names:
            if name not in known:
                raise CaseFileError(f"{where}: {field}: no tool {name!r}; known: {', '.join(sorted(known))}")
    allowed = {"read", *case.allow}
    for name in case.required_tool_names:
        if name in profile.tools and name in loaded.tools:
            effects = {e.value for e in loaded.tools.get(name).contract.effects}
            if not effects <= allowed:
                raise CaseFileError(
                    f"{where}: required_tools: {name} needs allow: [{', '.join(sorted(effects - {'read'}))}], "
                    "or it is never offered"
                )


def run_case(case: Case, number: int, *, base: Settings, model: Model, root: Path) -> RunResult:
    """Run `case` once as a task under `root` and judge it; a run that raises is a failed run."""
    scratch = root / f"{case.name}-{number}"
    workspace = scratch / "workspace"
    data_dir = workspace / ".agentd"
    started = time.perf_counter()
    task_id: str | None = None
    try:
        _lay_out(case, scratch, workspace)
        laid_out = _contents(workspace)
        data_dir.mkdir(parents=True)
        places = {"scratch": scratch, "workspace": workspace, "data_dir": data_dir, "case_dir": case.path(".")}
        env = {name: value.format_map({k: str(v) for k, v in places.items()}) for name, value in case.env.items()}
        with _environment(env):
            settings = _settings(base, case, data_dir, workspace)
            with EventStore(settings.url, synchronous=settings.sqlite_synchronous) as store:
                rt = open_runtime(settings, store, model=model)
                try:
                    _point_knowledge(rt, case, scratch)
                    task_id = new_task_id()
                    store.append(task_id, submit_task(
                        case.input, workspace, tenant=case.task_tenant, profile=case.task_profile,
                        allowed_effects=("read", *case.allow), max_steps=case.step_cap,
                        context=case.context or None,
                    ), expected_version=NO_STREAM, actor=check.DECIDER)
                    anyio.run(_drive, rt, store, case, task_id)
                finally:
                    rt.jobs.close()
                seconds = time.perf_counter() - started
                events = [r.event for r in store.read_stream(task_id)]
                prompts = _prompts(rt, events) if case.secrets else []
                files = files_after(case, scratch, workspace)
                undone = _undo(store, rt.artifacts, task_id, workspace, laid_out)
        verdict = check.judge(case, events, prompts=prompts, files=files)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # noqa: BLE001  a run that cannot finish is a failed run, said in its detail
        log.exception("eval run raised", case=case.name, run=number, task_id=task_id)
        detail = f"the run raised {type(e).__name__}: {e}"
        return RunResult(
            case=case.name, group=case.group, run=number, success=False, label="other", detail=detail,
            failures=({"label": "other", "detail": detail},), ending="error", answer=None, sources=(),
            steps=0, calls=0, prompt_tokens=0, evaluated_tokens=0, completion_tokens=0,
            seconds=time.perf_counter() - started, task_id=task_id, file=case.source,
        )
    return result_of(case, number, verdict, events, seconds=seconds, task_id=task_id, undo=undone)


def _contents(workspace: Path) -> dict[str, bytes]:
    """Every file in the workspace (agentd's data left out) and its bytes."""
    return {
        p.relative_to(workspace).as_posix(): p.read_bytes()
        for p in sorted(workspace.rglob("*"))
        if p.is_file() and not p.is_symlink() and ".agentd" not in p.relative_to(workspace).parts
    }


def _undo(store: EventStore, artifacts, task_id: str, workspace: Path, laid_out: Mapping[str, bytes]) -> str | None:
    """After the run: `agentd task undo` of what the task changed, whether that put the workspace back as
    the case laid it out, byte for byte, and then `task redo`, whether that brought back what the run
    left (so the workspace is judged, and kept, as the run left it). None when the task changed nothing."""
    if not changes.fold(store.read_stream(task_id)).changed:
        return None
    left = _contents(workspace)
    for kind, expected in (("undo", laid_out), ("redo", left)):
        try:
            undo.restore(store, artifacts, task_id, kind, by=check.DECIDER)
        except AgentdError as e:
            return f"{kind} refused: {e}"
        now = _contents(workspace)
        differs = sorted(p for p in set(now) | set(expected) if now.get(p) != expected.get(p))
        if differs:
            return f"{kind} differs: {', '.join(differs[:3])}"
    return "restored"


def result_of(
    case: Case,
    number: int,
    verdict: check.Verdict,
    events,
    *,
    seconds: float = 0.0,
    task_id: str | None = None,
    undo: str | None = None,
) -> RunResult:
    """What the report keeps of one judged run: its verdict and what its events say it cost."""
    usage = check.usage_of(events)
    return RunResult(
        case=case.name, group=case.group, run=number, success=verdict.success, label=verdict.label,
        detail=verdict.detail, failures=tuple({"label": f.label, "detail": f.detail} for f in verdict.failures),
        ending=verdict.ending, answer=verdict.answer, sources=verdict.sources, steps=usage.steps,
        calls=usage.calls, prompt_tokens=usage.prompt_tokens, evaluated_tokens=usage.evaluated_tokens,
        completion_tokens=usage.completion_tokens, seconds=seconds, task_id=task_id, file=case.source, undo=undo,
    )


async def _drive(rt, store: EventStore, case: Case, task_id: str) -> None:
    """Run the task; each time it waits for a person, decide as the case says and run it again.

    An approval the case does not list is denied (with a reason the checks recognise), unless the
    case expects the task to end waiting: then it is left pending and the run ends there.
    """
    for _ in range(MAX_APPROVAL_ROUNDS):
        phase = await run_task(rt, task_id)
        if phase != "awaiting_approval":
            return
        pending = [a for owner, a in store.approvals("pending") if owner == task_id]
        if not pending:
            return
        for approval in pending:
            decision = case.approvals.get(approval.tool)
            if decision is None and "awaiting_approval" in case.expect.ending:
                return
            grant = decision == "grant"
            reason = "" if grant else (check.NOT_GRANTED if decision is None else "the eval case denies it")
            decide(store, approval.approval_id, grant=grant, by=check.DECIDER, reason=reason)


def _settings(base: Settings, case: Case, data_dir: Path, workspace: Path) -> Settings:
    """The caller's settings (model, threads, window) with everything that is the run's own replaced.

    `database_url` is cleared: a configured database must never receive an eval's tasks. The scratch
    store is removed afterwards, so it skips fsync.
    """
    return Settings.model_validate({
        **base.model_dump(),
        "data_dir": data_dir,
        "database_url": None,
        "sqlite_synchronous": "off",
        "workspace": workspace,
        "plugins": tuple(case.path(p) for p in case.plugins),
        "skills_dirs": tuple(case.path(d) for d in case.skills_dirs),
    })


def _lay_out(case: Case, scratch: Path, workspace: Path) -> None:
    workspace.mkdir(parents=True)
    for name, text in case.files.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for source, dest in case.copies.items():
        src, target = case.path(source), scratch / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)
        else:
            shutil.copy2(src, target)


def _point_knowledge(rt, case: Case, scratch: Path) -> None:
    """The case's extra documents, next to a copy of the profile's own, and the profile pointed there."""
    if not case.knowledge:
        return
    profile = rt.profiles[case.task_profile]
    folder = scratch / "knowledge"
    if profile.knowledge is not None and profile.knowledge.is_dir():
        shutil.copytree(profile.knowledge, folder)
    for name, text in case.knowledge.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    rt.profiles[case.task_profile] = profile.model_copy(update={"knowledge": folder})


def _prompts(rt, events) -> list[str]:
    return [
        rt.artifacts.get(e.manifest.prompt_ref).decode("utf-8", errors="replace")
        for e in events
        if isinstance(e, ModelCalled) and e.manifest is not None
    ]


def files_after(case: Case, scratch: Path, workspace: Path) -> dict[str, str | None]:
    """The text of each file the case checks or keeps, as the run left it; None where there is no file."""
    found: dict[str, str | None] = {}
    for name in dict.fromkeys([*case.expect.files, *case.keeps]):
        # Resolved, symlinks included: a link the run left pointing elsewhere is not read through.
        path = (workspace / name).resolve()
        if not path.is_relative_to(scratch.resolve()) or not path.is_file():
            found[name] = None
            continue
        found[name] = path.read_text(encoding="utf-8", errors="replace")
    return found


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set these variables for the run and put back what was there, set or not, afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old

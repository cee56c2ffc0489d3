"""`agentd task`: submit, list, show and cancel tasks."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from runtime.cli._app import App, json_option, pass_app, task_options
from runtime.errors import NotFound
from runtime.output import echo_json, fields_table, table

if TYPE_CHECKING:
    from runtime.agent.accounting import Accounting
    from store.events import ModelCalled
    from store.state import TaskState

# Each command imports what it uses in its body: the profiles, the agent loop and the model take most of
# a second to import and only `task submit` and `task run` need them; the event classes, the writer and
# the fold are not needed by `task list`, which reads one table.

# store.events.task.INTEGER_MAX, the largest budget a database column holds; spelled here rather than
# imported, as the paragraph above says.
INTEGER_MAX = 2**63 - 1


@click.group()
def task() -> None:
    """Submit, list, show and cancel tasks."""


CONTEXT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def _context_pairs(ctx: click.Context, param: click.Parameter, pairs: tuple[str, ...]) -> dict[str, str]:
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not CONTEXT_KEY.fullmatch(key) or not value:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE (a key of letters, digits, _ . -, and a value)",
                            param_hint="'--context'")
        if key in context:
            raise click.BadParameter(f"{key!r} is given twice", param_hint="'--context'")
        context[key] = value
    return context


@task.command()
@click.argument("goal")
@click.option("--workspace", type=click.Path(path_type=Path), help="Folder the task may read and write.")
@click.option(
    "--max-steps", type=click.IntRange(min=1, max=INTEGER_MAX), help="Model calls allowed before the task stops."
)
@click.option("--max-tokens", type=click.IntRange(min=1, max=INTEGER_MAX), help="Tokens allowed before the task stops.")
@click.option(
    "--policy", metavar="POLICY",
    help="Which of the task's history each request shows: auto, compact, full, window:K, elide_tool_results:K "
    "or user_verbatim:K, each optionally +notes or +pinned_tail (default: the profile's, else the "
    "context_policy setting, auto unless set).",
)
@click.option(
    "--context", "context", multiple=True, metavar="KEY=VALUE", callback=_context_pairs,
    help="A trusted fact about the caller the task is shown, such as account_id=a-123 (repeatable).",
)
@click.option(
    "--conversation", is_flag=True,
    help="After each answer, wait for the user (agentd task say ID TEXT) instead of ending; "
    "agentd task close ID ends it.",
)
@click.option(
    "--confirm-changes", is_flag=True,
    help="Every change to a file waits for a person, who is shown its diff first (agentd approvals list, or the page).",
)
@task_options("the task")
@json_option
@pass_app
def submit(
    app: App,
    goal: str,
    workspace: Path | None,
    max_steps: int | None,
    max_tokens: int | None,
    policy: str | None,
    context: dict[str, str],
    conversation: bool,
    confirm_changes: bool,
    profile: str,
    tenant: str,
    allowed: tuple[str, ...],
    as_json: bool,
) -> None:
    """Submit a task with GOAL; prints its id. `agentd serve` runs it, or `agentd task run ID`."""
    from runtime.agent import plugins
    from runtime.harness.tasks import submit as submit_

    settings = app.settings(workspace=workspace)
    task_id, seq = submit_(
        app.store, goal, settings.workspace, profiles=plugins.load(settings.plugins).profiles,
        default_policy=settings.context_policy, profile=profile, allowed=allowed, policy=policy, actor="cli",
        tenant=tenant, max_steps=max_steps, max_tokens=max_tokens, context=context, conversation=conversation,
        confirm_changes=confirm_changes, secrets=settings.secrets,
    )
    if as_json:
        echo_json({"task_id": task_id, "seq": seq})
        return
    click.echo(task_id)
    from runtime.cli._daemon import served, unserved

    if not served(settings.data_dir):
        # On stderr: stdout stays the bare id that scripts read.
        click.echo(unserved(settings.data_dir, task_id), err=True)


def _known_phase(ctx: click.Context, param: click.Parameter, phase: str | None) -> str | None:
    if phase is None:
        return None
    # Only when a phase is given: `task list` alone reads one table and loads no event classes.
    from store.events import TaskPhase

    known = [p.value for p in TaskPhase]
    if phase not in known:
        raise click.BadParameter(f"{phase!r} is not a phase: {', '.join(known)}", param_hint="'--phase'")
    return phase


@task.command("list")
@click.option("--phase", callback=_known_phase, help="Only tasks in this phase.")
@json_option
@pass_app
def list_(app: App, phase: str | None, as_json: bool) -> None:
    """List tasks, oldest first."""
    from store.queries.tasks import summaries as read_summaries

    with app.reader().reading() as conn:
        summaries = read_summaries(conn, phase=phase)
    if as_json:
        echo_json(summaries)
        return
    click.echo(
        table(
            [(s.task_id, s.phase, s.steps, s.submitted_at[:19].replace("T", " "), s.goal) for s in summaries],
            ["ID", "PHASE", "STEPS", "SUBMITTED (UTC)", "GOAL"],
        )
    )


@task.command()
@click.argument("task_id")
@click.option("--at", "at_seq", type=click.IntRange(min=1), help="Show the task as it was right after event SEQ.")
@click.option("--calls", is_flag=True, help="List the task's model calls with their token figures.")
@click.option("--manifest", "manifest_n", type=click.IntRange(min=1), help="Show the context manifest of call N.")
@click.option("--prompt", is_flag=True, help="With --manifest: print the exact prompt the model received.")
@click.option("--buckets", is_flag=True, help="Where each call's tokens went, and the session's running totals.")
@json_option
@pass_app
def show(
    app: App, task_id: str, at_seq: int | None, calls: bool, manifest_n: int | None, prompt: bool, buckets: bool,
    as_json: bool,
) -> None:
    """Show one task: state, completed actions, approvals and artifacts; or its calls and manifests."""
    if prompt and manifest_n is None:
        # Not implied: a task has many calls, and guessing which one's prompt to print would print the
        # wrong one as often as not.
        raise click.UsageError("--prompt needs --manifest N: the call whose prompt to print")
    from store.events import ModelCalled

    store = app.store()
    if buckets:
        records = store.read_stream(task_id)
        if not records:
            raise NotFound(f"no task {task_id!r}")
        from runtime.agent.accounting import account

        show_buckets(account(records), as_json)
        return
    if calls or manifest_n is not None:
        records = store.read_stream(task_id)
        if not records:
            raise NotFound(f"no task {task_id!r}")
        model_calls = [r.event for r in records if isinstance(r.event, ModelCalled)]
        if manifest_n is None:
            show_calls(model_calls, as_json)
        else:
            show_manifest(app, model_calls, manifest_n, prompt, as_json)
        return
    state = store.task(task_id) if at_seq is None else store.task_at(task_id, at_seq)
    if state is None:
        where = f" as of event {at_seq}" if at_seq is not None else ""
        raise NotFound(f"no task {task_id!r}{where}")
    if as_json:
        echo_json(state)
        return
    records = store.read_stream(task_id, until=at_seq)
    if at_seq is None:
        from runtime.cli._now import now

        click.echo(render_state(state, now(app.settings().data_dir, state, records)))
    else:
        click.echo(render_state(state))  # as it was then: what it was doing that moment is not in the log
    click.echo("\n" + _changes.changes_section(records, app.artifacts()))
    outcome = _outcome(records)
    if outcome:
        click.echo(f"\n{outcome}")


def _outcome(records) -> str | None:
    """How the task ended, or why it waits: its answer or escalation, why it failed, was cancelled or
    waits for approval. None while it runs: a wait or a failure before the last phase is over."""
    from store.events import AnswerGiven, TaskEscalated, TaskPhase, TaskPhaseChanged

    for rec in reversed(records):
        e = rec.event
        if isinstance(e, (AnswerGiven, TaskEscalated)):
            return _outcome_line(e)
        if isinstance(e, TaskPhaseChanged):
            if e.phase in (TaskPhase.FAILED, TaskPhase.CANCELLED):
                return _outcome_line(e)
            if e.phase == TaskPhase.AWAITING_APPROVAL:
                return f"waiting: {e.reason} (agentd approvals list)"
            if e.phase not in (TaskPhase.COMPLETED, TaskPhase.WAITING_FOR_USER):
                # The answer or escalation comes just before the phase that follows it.
                return None
    return None


def _completed(records) -> bool:
    """Whether the task did what it was asked: completed with an answer, not an escalation."""
    from store.events import AnswerGiven, TaskEscalated, TaskPhase, TaskPhaseChanged

    for rec in reversed(records):
        if isinstance(rec.event, AnswerGiven):
            return True
        if isinstance(rec.event, TaskEscalated) or (
            isinstance(rec.event, TaskPhaseChanged)
            and rec.event.phase not in (TaskPhase.COMPLETED, TaskPhase.WAITING_FOR_USER)
        ):
            return False
    return False


def render_state(state: TaskState, now: str | None = None) -> str:
    """`now`: what the task is doing at this moment, shown under its phase; None for a finished task."""
    s = state.summary
    parts = [
        fields_table(
            [
                ("task", s.task_id),
                ("goal", s.goal),
                ("phase", s.phase),
                *([("now", now)] if now is not None else []),
                ("workspace", s.workspace),
                ("tenant", s.tenant),
                ("steps", f"{s.steps} of {s.max_steps}"),
                ("tokens", f"{s.tokens_used} of {s.max_tokens}"),
                ("tests", s.test_status),
                ("submitted", s.submitted_at),
                ("updated", s.updated_at),
                ("finished", s.finished_at),
                ("as of event", f"{s.last_seq} (version {s.version})"),
            ]
        ),
        "",
        "completed actions:",
        table([(a.seq, a.tool, a.status, a.call_id) for a in state.actions], ["SEQ", "TOOL", "STATUS", "CALL"]),
        "",
        "approvals:",
        table(
            [(a.approval_id, a.tool, a.status, a.decided_by, a.reason) for a in state.approvals],
            ["ID", "TOOL", "STATUS", "DECIDED BY", "REASON"],
        ),
        "",
        "artifacts:",
        table(
            [(a.seq, a.operation, a.size, (a.sha256 or "")[:12], a.test_status, a.path) for a in state.artifacts],
            ["SEQ", "OP", "SIZE", "SHA256", "TESTS", "PATH"],
        ),
        "",
        "notifications:",
        table(
            [(n.seq, n.source, _admission(n), n.text) for n in state.notifications],
            ["SEQ", "SOURCE", "ADMITTED", "TEXT"],
        ),
        "",
        "jobs:",
        table(
            [(j.job_id, j.started_seq, "running" if j.finished_seq is None else f"exit {j.exit_code}", j.command)
             for j in state.jobs],
            ["ID", "STARTED", "STATE", "COMMAND"],
        ),
    ]
    return "\n".join(parts)


def _admission(n) -> str:
    if n.coalesced_into:
        return f"coalesced into {n.coalesced_into}"
    return "waiting" if n.admitted_call is None else f"request {n.admitted_call}"


@task.command()
@click.argument("task_id")
@click.option("--reason", default="cancelled by the operator", show_default=True)
@pass_app
def cancel(app: App, task_id: str, reason: str) -> None:
    """Cancel a task that has not finished."""
    store = app.store()
    state = store.task(task_id)
    if state is None:
        raise NotFound(f"no task {task_id!r}")
    from runtime.harness.tasks import cancel_task

    store.append(task_id, cancel_task(state, reason), expected_version=state.summary.version, actor="cli")
    click.echo(f"{task_id} cancelled")


@task.command()
@click.argument("task_id")
@click.argument("text")
@json_option
@pass_app
def say(app: App, task_id: str, text: str, as_json: bool) -> None:
    """Add a message from you to a task (TEXT, or - to read it from stdin).

    A running task takes it in at its next request; one that has answered (a conversation waiting
    for you, or a completed task) goes on from its transcript.
    """
    from runtime.harness.tasks import append_decided, say as say_

    if text == "-":
        text = sys.stdin.read()
    records = append_decided(
        app.store(), task_id, lambda records: say_(records, text), actor="cli", secrets=app.settings().secrets
    )
    if as_json:
        echo_json({"task_id": task_id, "seq": records[0].seq})
    else:
        click.echo(f"{task_id} has your message (event {records[0].seq})")


@task.command()
@click.argument("task_id")
@pass_app
def close(app: App, task_id: str) -> None:
    """End a conversation that waits for you; its last answer stands."""
    from runtime.harness.tasks import append_decided, close_task

    append_decided(app.store(), task_id, close_task, actor="cli")
    click.echo(f"{task_id} closed")


def show_calls(calls: list[ModelCalled], as_json: bool) -> None:
    rows = [
        (n, c.call_index, c.attempt, c.decision, c.prompt_tokens, c.cached_tokens, c.evaluated_tokens,
         c.completion_tokens, f"{c.ttft_s:.2f}", f"{c.generation_s:.2f}", c.prefix_break or "")
        for n, c in enumerate(calls, start=1)
    ]
    if as_json:
        echo_json([{k: v for k, v in c.model_dump(mode="json").items() if k != "manifest"} for c in calls])
        return
    click.echo(
        table(
            rows,
            ["N", "STEP", "TRY", "DECISION", "PROMPT", "CACHED", "EVALUATED", "OUT", "TTFT S", "GEN S", "PREFIX BREAK"],
        )
    )


def show_buckets(a: Accounting, as_json: bool) -> None:
    if as_json:
        echo_json(a)
        return
    click.echo(table(
        [(c.call_index, c.attempt, c.system, c.tool_definitions, c.tool_results, c.conversation, c.total,
          c.left_out, c.billed, c.evaluated) for c in a.calls],
        ["STEP", "TRY", "SYSTEM", "TOOL DEFS", "TOOL RESULTS", "CONVERSATION", "TOTAL", "LEFT OUT", "BILLED",
         "EVALUATED"],
    ))
    click.echo(f"\ntokens billed {a.billed}, evaluated {a.evaluated} (after prefix reuse)")
    unused = ", ".join(a.unused_tools) or "none"
    click.echo(f"on definitions of tools never called ({unused}): {a.unused_tool_definitions}")
    if a.compactions:
        click.echo(
            f"on {a.compactions} compaction call(s): {a.compaction_prompt_tokens} read, "
            f"{a.compaction_completion_tokens} written"
        )
    if a.notes:
        click.echo(f"on {a.notes} note-taker call(s): {a.note_prompt_tokens} read, {a.note_completion_tokens} written")


def show_manifest(app: App, calls: list[ModelCalled], n: int, prompt: bool, as_json: bool) -> None:
    if n > len(calls):
        raise NotFound(f"the task has {len(calls)} model calls, not {n}")
    call = calls[n - 1]
    manifest = call.manifest
    if manifest is None:
        raise NotFound(f"call {n} recorded no manifest")
    if prompt:
        click.echo(app.artifacts().get(manifest.prompt_ref).decode(), nl=False)
        return
    if as_json:
        echo_json(manifest)
        return
    b = manifest.buckets
    click.echo(
        fields_table(
            [
                ("call", f"{n} (step {call.call_index}, try {call.attempt}, {manifest.decision})"),
                ("tokens", f"{manifest.total_tokens} of a budget of {manifest.budget} "
                           f"(window {manifest.window} - output {manifest.max_output} - overhead {manifest.overhead})"),
                ("buckets", f"system {b.system}, tool definitions {b.tool_definitions}, "
                            f"tool results {b.tool_results}, conversation {b.conversation}"),
                ("prefix", f"{manifest.prefix_tokens} tokens, sha256 {manifest.prefix_sha256[:16]}"),
                ("prompt", manifest.prompt_ref),
            ]
        )
    )
    click.echo("")
    click.echo(
        table(
            [(i.block, i.kind, i.source, i.trust, i.version, i.tokens, _score(i.utility), i.sha256[:12])
             for i in manifest.items],
            ["BLOCK", "KIND", "SOURCE", "TRUST", "VERSION", "TOKENS", "UTILITY", "SHA256"],
        )
    )
    flagged = [(i.block, flag) for i in manifest.items for flag in i.flags]
    if flagged:
        click.echo("\nflagged (instruction-like text inside a data block; the model saw it as data):")
        click.echo(table(flagged, ["BLOCK", "FLAG"]))
    if manifest.left_out:
        click.echo("\nleft out:")
        click.echo(
            table(
                [(o.source, o.kind, o.tokens, _score(o.utility), o.reason) for o in manifest.left_out],
                ["SOURCE", "KIND", "TOKENS", "UTILITY", "WHY"],
            )
        )


def _score(utility: float | None) -> str:
    return "-" if utility is None else f"{utility:g}"


@task.command()
@click.argument("task_id")
@click.option("--max-decisions", type=click.IntRange(min=1), help="Stop after this many decisions.")
@pass_app
@click.pass_context
def run(ctx: click.Context, app: App, task_id: str, max_decisions: int | None) -> None:
    """Run a task in the foreground until it finishes or waits for a person.

    Each decision is shown on stderr as it happens; the task's phase and outcome go to stdout. Exits 1
    when the task failed, was cancelled or escalated, 0 when it answered or waits for an approval.
    Ctrl-C stops it (exit 130) once the model call in flight has stopped, a second Ctrl-C at once; the
    task goes on from its log at the next `agentd task run` or `agentd serve`. Refused while a daemon
    serves the data directory: it runs the task itself.
    """
    from runtime.cli._foreground import INTERRUPTED_EXIT, run_in_foreground
    from runtime.cli._watch import Watch
    from runtime.daemon.lock import RunLock
    from runtime.daemon.membership import foreground_lease
    from runtime.daemon.wiring import open_runtime
    from runtime.errors import InstanceLocked
    from store.events import TaskPhase

    settings = app.settings()
    store = app.store()
    if store.task(task_id) is None:
        raise NotFound(f"no task {task_id!r}")
    lock = RunLock(settings.data_dir)
    try:
        lock.acquire()
    except InstanceLocked as e:
        raise InstanceLocked(f"{e}: follow this one with `agentd task show {task_id}`, or stop it first") from None
    try:
        with foreground_lease(store, task_id, settings.lease_s) as lost:
            runtime = open_runtime(settings, store)
            watch = runtime.progress = Watch(sys.stderr)
            phase = run_in_foreground(runtime, task_id, max_decisions, watch, lost)
    finally:
        lock.release()
    if phase is None:
        state = store.task(task_id)
        click.echo(f"{task_id} {state.summary.phase if state else 'unknown'}")
        click.echo(f"interrupted (agentd task run {task_id} goes on)")
        ctx.exit(INTERRUPTED_EXIT)
    click.echo(f"{task_id} {phase}")
    records = store.read_stream(task_id)
    outcome = _outcome(records)
    if outcome:
        click.echo(outcome)
    if phase == TaskPhase.WAITING_FOR_USER:
        click.echo(f'waiting for you: agentd task say {task_id} "..." goes on, agentd task close {task_id} ends it')
    elif phase == TaskPhase.RUNNING and max_decisions:
        decisions = "decision" if max_decisions == 1 else "decisions"
        click.echo(f"stopped after {max_decisions} {decisions} (agentd task run {task_id} goes on)")
    if phase in {p.value for p in TaskPhase if p.finished} and not _completed(records):
        ctx.exit(1)


def _outcome_line(event) -> str:
    from store.events import AnswerGiven, TaskEscalated, TaskPhase

    if isinstance(event, AnswerGiven):
        sources = f" (sources: {', '.join(event.sources)})" if event.sources else ""
        return f"answer: {event.answer}{sources}"
    if isinstance(event, TaskEscalated):
        return f"escalated: {event.reason}"
    if event.phase == TaskPhase.CANCELLED:
        return f"cancelled: {event.reason}"
    return f"failed: {event.reason}"


# Registers `task diff`, `task undo` and `task redo` on the group above.
from runtime.cli import changes as _changes  # noqa: E402,F401

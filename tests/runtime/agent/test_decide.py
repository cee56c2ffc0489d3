"""What the loop decides, as pure functions of the task's view: no model, no store, no tools run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict

from runtime.agent import decide, proposal
from runtime.agent.decide import Decision, Policy, RunTool, TakeInSkill, arguments_hash
from runtime.agent.view import TaskView
from runtime.tools import Effect, ToolContract
from store.events import (
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    FileChanged,
    Recorded,
    SkillActivated,
    TaskEscalated,
    TaskPhase,
    TaskPhaseChanged,
    TaskSubmitted,
    ToolCallExecuted,
    ToolCallProposed,
    ToolCallStarted,
)

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
POLICY = Policy(now=NOW, approval_ttl=timedelta(hours=1), policy_version="v1", new_approval_id=lambda: "ap-new")
ARGS = {"command": "make deploy"}


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str


def contract(*, needs_approval: bool) -> ToolContract:
    return ToolContract(
        name="shell", description="runs a command", input_model=_Args, output_model=_Args,
        effects=(Effect.EXTERNAL,), idempotent=False, needs_approval=needs_approval, scope="workspace", timeout_s=5,
    )


def view_of(*events) -> TaskView:
    records = [TaskSubmitted(goal="deploy", workspace="/w"), *events]
    return TaskView.of(
        Recorded(seq, "t-1", seq, "2026-12-02T12:00:00Z", "ann", None, None, e) for seq, e in enumerate(records, 1)
    )


PROPOSED = ToolCallProposed(call_id="c1", tool="shell", arguments=ARGS, reason="deploy")


def requested(expires: datetime | None = None, arguments: dict = ARGS) -> ApprovalRequested:
    return ApprovalRequested(
        approval_id="ap-1", call_id="c1", tool="shell", arguments_hash=arguments_hash(arguments),
        expires_at=expires.isoformat() if expires else None,
    )


def test_nothing_to_settle_when_no_call_waits() -> None:
    assert decide.settle(view_of(TaskPhaseChanged(phase=TaskPhase.RUNNING)), POLICY) is None


def test_an_undecided_approval_leaves_the_task_waiting() -> None:
    assert decide.settle(view_of(PROPOSED, requested(NOW + timedelta(minutes=5))), POLICY) is None


def test_a_granted_call_runs_once_approved_and_the_task_runs_again() -> None:
    d = decide.settle(view_of(PROPOSED, requested(), ApprovalGranted(approval_id="ap-1", by="ann")), POLICY)
    assert d.effect == RunTool(PROPOSED, approved=True)
    assert [(type(e).__name__, getattr(e, "phase", None)) for e in d.events] == [
        ("TaskPhaseChanged", TaskPhase.RUNNING)
    ]


def test_a_call_whose_arguments_changed_after_approval_is_recorded_denied_and_not_run() -> None:
    changed = requested(arguments={"command": "make test"})
    d = decide.settle(view_of(PROPOSED, changed, ApprovalGranted(approval_id="ap-1", by="ann")), POLICY)
    assert d.effect is None
    executed = d.events[-1]
    assert isinstance(executed, ToolCallExecuted) and executed.status == "denied"
    assert executed.observation["message"] == "arguments changed after approval"


def test_an_expired_approval_is_denied_by_agentd_in_the_same_decision() -> None:
    d = decide.settle(view_of(PROPOSED, requested(NOW - timedelta(seconds=1))), POLICY)
    assert [type(e).__name__ for e in d.events] == ["ApprovalDenied", "TaskPhaseChanged", "ToolCallExecuted"]
    assert d.events[0].by == "agentd" and d.events[-1].observation["message"] == "expired"


def test_a_started_call_without_a_result_asks_a_person_before_running_again() -> None:
    started = ToolCallStarted(call_id="c1", tool="shell", idempotent=False)
    d = decide.settle(view_of(PROPOSED, started), POLICY)
    assert d.waits and d.effect is None
    assert isinstance(d.events[0], ApprovalRequested) and d.events[0].approval_id == "ap-new"
    assert d.events[0].expires_at == (NOW + timedelta(hours=1)).isoformat()
    asked = d.events[0]
    assert decide.settle(view_of(PROPOSED, started, asked), POLICY) == Decision(waits=True)
    denied = decide.settle(
        view_of(PROPOSED, started, asked, ApprovalDenied(approval_id="ap-new", by="ann", reason="no")), POLICY
    )
    assert denied.effect is None and denied.events[-1].status == "outcome_unknown"
    granted = decide.settle(view_of(PROPOSED, started, asked, ApprovalGranted(approval_id="ap-new", by="ann")), POLICY)
    assert granted.effect == RunTool(PROPOSED, approved=True)


def test_an_idempotent_call_left_unfinished_simply_runs_again() -> None:
    started = ToolCallStarted(call_id="c1", tool="shell", idempotent=True)
    assert decide.settle(view_of(PROPOSED, started), POLICY) == Decision(effect=RunTool(PROPOSED, approved=True))


def test_a_finished_call_is_not_settled_again() -> None:
    started = ToolCallStarted(call_id="c1", tool="shell", idempotent=False)
    done = ToolCallExecuted(call_id="c1", tool="shell", status="ok")
    assert decide.settle(view_of(PROPOSED, requested(), ApprovalGranted(approval_id="ap-1", by="a"), started, done),
                         POLICY) is None


def test_a_tool_that_needs_approval_is_proposed_and_waits() -> None:
    action = proposal.CallTool(action="call_tool", tool="shell", arguments=ARGS, reason="deploy")
    d = decide.act(view_of(), 3, action, contract(needs_approval=True), POLICY)
    assert d.waits and d.effect is None
    assert [type(e).__name__ for e in d.events] == ["ToolCallProposed", "ApprovalRequested", "TaskPhaseChanged"]
    assert d.events[0].call_id == "c3" and d.events[1].arguments_hash == arguments_hash(ARGS)


def test_a_tool_without_approval_is_proposed_and_run() -> None:
    action = proposal.CallTool(action="call_tool", tool="shell", arguments=ARGS, reason="deploy")
    d = decide.act(view_of(), 2, action, contract(needs_approval=False), POLICY)
    assert not d.waits and d.events == (d.effect.proposed,) and not d.effect.approved


def test_an_active_skill_that_allows_the_tool_approves_it_in_advance() -> None:
    skill = SkillActivated(call_index=1, name="deployer", content_hash="0" * 64, folder="/s/deployer", body="b",
                           allowed_tools=("shell",))
    action = proposal.CallTool(action="call_tool", tool="shell", arguments=ARGS, reason="deploy")
    d = decide.act(view_of(skill), 2, action, contract(needs_approval=True), POLICY)
    assert not d.waits and d.effect.approved
    assert [type(e).__name__ for e in d.events] == ["ToolCallProposed", "ApprovalRequested", "ApprovalGranted"]
    assert d.events[2].by == "skill:deployer"


def test_an_answer_completes_the_task_and_a_skill_is_taken_in_as_the_one_side_effect() -> None:
    answered = decide.act(view_of(), 1, proposal.FinalAnswer(action="final_answer", answer="done", sources=[]),
                          None, POLICY)
    assert [type(e).__name__ for e in answered.events] == ["AnswerGiven", "TaskPhaseChanged"]
    assert answered.events[1].phase == TaskPhase.COMPLETED and answered.effect is None
    skill = decide.act(view_of(), 4, proposal.ActivateSkill(action="activate_skill", skill="deployer"), None, POLICY)
    assert skill == Decision(effect=TakeInSkill("deployer", 4))


# -- a task no reply could carry further ---------------------------------------------------------


def _run(call_id: str, tool: str, effects: tuple[str, ...], status: str, error: str | None = None) -> list:
    observation = {"error": error} if error else {}
    return [ToolCallStarted(call_id=call_id, tool=tool, idempotent=True, effects=effects),
            ToolCallExecuted(call_id=call_id, tool=tool, status=status, observation=observation)]


def test_a_task_with_no_blocked_call_is_not_handed_over() -> None:
    assert decide.hand_over(view_of(*_run("c1", "read_file", ("read",), "ok"))) is None
    # A read that failed meant to change nothing: there is nothing for a person to take over.
    assert decide.hand_over(view_of(*_run("c1", "read_file", ("read",), "error", "not_found"))) is None


def test_a_refused_write_hands_the_task_over_saying_nothing_was_changed() -> None:
    d = decide.hand_over(view_of(*_run("c1", "write_file", ("write",), "refused", "outside_workspace")))
    assert d is not None
    escalated, ended = d.events
    assert isinstance(escalated, TaskEscalated) and escalated.reason == (
        "agentd handed the task over, the model gave no answer that could be accepted; "
        "write_file was refused: outside_workspace; nothing was changed"
    )
    assert ended.phase is TaskPhase.COMPLETED and ended.reason == f"escalated: {escalated.reason}"


def test_a_hand_over_names_what_the_task_did_change() -> None:
    started, executed = _run("c1", "append_file", ("write",), "ok")
    changed = FileChanged(call_id="c1", path="todo.txt", before_sha256="a" * 64, after_sha256="b" * 64)
    view = view_of(started, changed, executed, *_run("c2", "edit_file", ("write",), "error", "text_not_found"))
    d = decide.hand_over(view)
    assert d is not None and d.events[0].reason.endswith("edit_file failed: text_not_found; changed todo.txt")

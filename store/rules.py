"""The rules an append must keep, as pure checks on the state it changes.

The live projector (against rows it reads from the tables) and the in-memory fold (against what it
has folded so far) call these same functions, so they refuse the same appends with the same words.
Each takes the prior state of the one thing the event changes, in the smallest form both folds hold,
and raises `StoreError` when the event may not follow it.
"""

from __future__ import annotations

from collections.abc import Iterable

from store.errors import StoreError

# The state of one notification for one task before it is admitted: (admitted call, coalesced into).
PENDING: tuple[int | None, str | None] = (None, None)


def task_submitted(known: bool, task_id: str, seq: int) -> None:
    if known:
        raise StoreError(f"task {task_id} was already submitted (event {seq})")


def task_exists(known: bool, task_id: str, seq: int, type_name: str) -> None:
    if not known:
        raise StoreError(f"event {seq} ({type_name}) is for {task_id!r}, which is not a submitted task")


def approval_requested(prior: tuple[str, str] | None, approval_id: str, seq: int) -> None:
    """`prior` is (task id, status) of an approval with this id, if there is one."""
    if prior is not None:
        raise StoreError(f"approval {approval_id} was already requested (event {seq})")


def approval_decided(prior: tuple[str, str] | None, task_id: str, approval_id: str, seq: int) -> None:
    if prior != (task_id, "pending"):
        raise StoreError(f"event {seq} decides approval {approval_id}, which is not pending")


def notification_enqueued(known: bool, unknown_tasks: Iterable[str], notification_id: str, seq: int) -> None:
    if known:
        raise StoreError(f"notification {notification_id} was already enqueued (event {seq})")
    unknown = list(unknown_tasks)
    if unknown:
        raise StoreError(f"notification {notification_id} names tasks that do not exist: {unknown}")


def notification_admitted(prior: tuple | None, task_id: str, notification_id: str, seq: int) -> None:
    """`prior` is the (admitted call, coalesced into) of the notification for the task, None if it never had it."""
    if prior != PENDING:
        raise StoreError(
            f"event {seq} admits notification {notification_id} into {task_id}, which has it "
            "admitted already or never had it"
        )


def schedule_added(prior: tuple | None, schedule_id: str, seq: int) -> None:
    """`prior` is the schedule's (removed seq, last fire time), None if there is no such schedule."""
    if prior is not None:
        raise StoreError(f"schedule {schedule_id} already exists (event {seq})")


def schedule_live(prior: tuple | None, schedule_id: str, seq: int) -> tuple:
    if prior is None or prior[0] is not None:
        raise StoreError(f"schedule {schedule_id} does not exist or was removed (event {seq})")
    return prior


def schedule_fired(prior: tuple | None, schedule_id: str, fire_time: str, seq: int) -> None:
    last = schedule_live(prior, schedule_id, seq)[1]
    if last is not None and fire_time <= last:
        raise StoreError(f"schedule {schedule_id} already fired for {last}; {fire_time} is not later (event {seq})")


def job_started(finished: bool | None, job_id: str, seq: int) -> None:
    """`finished` is None for no such job, False while it runs, True once it has finished."""
    if finished is not None:
        raise StoreError(f"job {job_id} was already started (event {seq})")


def job_finished(finished: bool | None, job_id: str, seq: int) -> None:
    if finished is not False:
        raise StoreError(f"job {job_id} is not running (event {seq})")


# A tool call's prior state is a `store.calls.ToolCall`, None if the task never proposed it.


def call_proposed(prior, task_id: str, call_id: str, seq: int) -> None:
    if prior is not None:
        raise StoreError(
            f"event {seq} proposes call {call_id} of {task_id} again (it was proposed at event {prior.proposed_seq})"
        )


def call_started(prior, task_id: str, call_id: str, tool: str, seq: int) -> None:
    _call_known(prior, "starts", task_id, call_id, tool, seq)
    if prior.finished_seq is not None:
        raise StoreError(
            f"event {seq} starts call {call_id} of {task_id}, which has its result already (event {prior.finished_seq})"
        )
    # After a stop, the live path starts an open call again only if its tool is idempotent or a person
    # approved running it again since it last started.
    if prior.started_seq is not None and not prior.idempotent and (prior.granted_seq or 0) < prior.started_seq:
        raise StoreError(
            f"event {seq} starts call {call_id} of {task_id} again (it started at event {prior.started_seq}); "
            "only an idempotent call, or one a person approved running again, starts twice"
        )


def call_finished(prior, task_id: str, call_id: str, tool: str, seq: int) -> None:
    _call_known(prior, "records a result for", task_id, call_id, tool, seq)
    if prior.finished_seq is not None:
        raise StoreError(
            f"event {seq} records a second result for call {call_id} of {task_id} (its result is event "
            f"{prior.finished_seq}): a call has one result"
        )


def _call_known(prior, verb: str, task_id: str, call_id: str, tool: str, seq: int) -> None:
    if prior is None:
        raise StoreError(f"event {seq} {verb} call {call_id} of {task_id}, which was never proposed")
    if tool != prior.tool:
        raise StoreError(
            f"event {seq} names tool {tool!r} for call {call_id} of {task_id}, which was proposed for {prior.tool!r}"
        )

"""The store's named reads (store/queries/), against a real SQLite file filled by real appends."""

from __future__ import annotations

from store import NO_STREAM, EventStore, Recorded
from store.events import (
    NOTIFICATIONS_STREAM,
    SCHEDULES_STREAM,
    AdmittedNotification,
    ApprovalDenied,
    ApprovalGranted,
    ApprovalRequested,
    JobFinished,
    JobStarted,
    NotificationEnqueued,
    NotificationsAdmitted,
    ScheduleAdded,
    ScheduleFired,
    ScheduleRemoved,
    TaskPhase,
    TaskSubmitted,
)
from store.queries import approvals, jobs, notifications, schedules, tasks
from store.state import Schedule


def submit(store: EventStore, task_id: str) -> str:
    store.append(task_id, [TaskSubmitted(goal=f"goal of {task_id}", workspace="/ws")], expected_version=NO_STREAM)
    return task_id


def enqueue(store: EventStore, n: str, tasks_: tuple[str, ...], *, source: str = "operator", key: str | None = None,
            payload: dict | None = None) -> NotificationEnqueued:
    event = NotificationEnqueued(notification_id=n, source=source, kind="note", tasks=tasks_, text=f"text of {n}",
                                 dedupe_key=key, payload=payload or {})
    store.append(NOTIFICATIONS_STREAM, [event])
    return event


def admit(store: EventStore, task_id: str, call_index: int, *ids: str) -> None:
    items = tuple(AdmittedNotification(notification_id=i, source="operator", kind="note", text="x") for i in ids)
    store.append(task_id, [NotificationsAdmitted(call_index=call_index, items=items)])


# -- notifications -------------------------------------------------------------------------------


def test_pending_is_what_waits_for_that_task_oldest_first_and_depth_counts_it_for_every_task(store) -> None:
    submit(store, "t-1")
    submit(store, "t-2")
    enqueue(store, "n-1", ("t-1",), key="k")
    enqueue(store, "n-2", ("t-1", "t-2"))
    enqueue(store, "n-3", ("t-1",), key="k")
    admit(store, "t-1", 1, "n-2")
    with store.reading() as conn:
        waiting = notifications.pending(conn, "t-1")
        assert [(p.notification_id, p.dedupe_key, p.text) for p in waiting] == [
            ("n-1", "k", "text of n-1"), ("n-3", "k", "text of n-3"),
        ]
        assert waiting[0].seq < waiting[1].seq
        assert [p.notification_id for p in notifications.pending(conn, "t-2")] == ["n-2"]
        assert notifications.pending(conn, "t-9") == []
        assert notifications.depth(conn) == 3


def test_a_listing_with_a_limit_keeps_the_latest_rows_and_shows_them_oldest_first(store) -> None:
    submit(store, "t-1")
    submit(store, "t-2")
    enqueue(store, "n-1", ("t-1",))
    enqueue(store, "n-2", ("t-1", "t-2"))
    enqueue(store, "n-3", ("t-2",))
    admit(store, "t-1", 4, "n-2")
    with store.reading() as conn:
        everything = notifications.listing(conn)
        assert [(r.notification_id, r.task_id) for r in everything] == [
            ("n-1", "t-1"), ("n-2", "t-2"), ("n-2", "t-1"), ("n-3", "t-2"),
        ]
        assert [(r.notification_id, r.task_id) for r in notifications.listing(conn, limit=2)] == [
            ("n-2", "t-1"), ("n-3", "t-2"),
        ]
        [mine] = [r for r in notifications.listing(conn, "t-1") if r.notification_id == "n-2"]
        assert (mine.admitted_call, mine.coalesced_into, mine.source) == (4, None, "operator")
        assert [r.notification_id for r in notifications.listing(conn, "t-2", 1)] == ["n-3"]


def test_dedupe_keys_are_every_key_one_source_enqueued_whether_admitted_or_not(store) -> None:
    submit(store, "t-1")
    enqueue(store, "n-1", ("t-1",), source="job", key="job:j-1")
    enqueue(store, "n-2", ("t-1",), source="job", key="job:j-2")
    enqueue(store, "n-3", ("t-1",), source="file_watcher", key="file:a.txt")
    admit(store, "t-1", 1, "n-1")
    with store.reading() as conn:
        assert notifications.dedupe_keys(conn, "job") == {"job:j-1", "job:j-2"}
        assert notifications.dedupe_keys(conn, "approval") == set()


def test_sent_pairs_each_task_told_with_the_payload_in_enqueue_order(store) -> None:
    submit(store, "t-1")
    submit(store, "t-2")
    enqueue(store, "n-1", ("t-1", "t-2"), source="skill_catalog", payload={"fingerprint": "a"})
    enqueue(store, "n-2", ("t-1",), source="operator", payload={"fingerprint": "other"})
    enqueue(store, "n-3", ("t-1",), source="skill_catalog", payload={"fingerprint": "b"})
    with store.reading() as conn:
        sent = notifications.sent(conn, "skill_catalog")
    assert sorted(sent[:2]) == [("t-1", {"fingerprint": "a"}), ("t-2", {"fingerprint": "a"})]
    assert sent[2:] == [("t-1", {"fingerprint": "b"})]


# -- jobs ----------------------------------------------------------------------------------------


def test_a_job_is_recorded_once_its_start_is_in_the_log(store) -> None:
    submit(store, "t-1")
    with store.reading() as conn:
        assert not jobs.job_recorded(conn, "j-1")
    store.append("t-1", [JobStarted(job_id="j-1", call_id="c1", command="make")])
    with store.reading() as conn:
        assert jobs.job_recorded(conn, "j-1")
        assert not jobs.job_recorded(conn, "j-2")


def test_jobs_are_unfinished_until_their_end_is_recorded_and_then_carry_its_seq(store) -> None:
    submit(store, "t-1")
    submit(store, "t-2")
    store.append("t-1", [JobStarted(job_id="j-1", call_id="c1", command="make")])
    store.append("t-2", [JobStarted(job_id="j-2", call_id="c1", command="make test")])
    [done] = store.append("t-1", [JobFinished(job_id="j-1", exit_code=0, summary="ok")])
    with store.reading() as conn:
        assert jobs.unfinished_jobs(conn) == [("j-2", "t-2", "make test")]
        assert jobs.finished_jobs(conn) == [("j-1", "t-1", "make", done.seq)]


# -- schedules -----------------------------------------------------------------------------------


def add(store: EventStore, schedule_id: str, **kw) -> Recorded:
    event = ScheduleAdded(schedule_id=schedule_id, cron="0 9 * * *", goal=f"goal of {schedule_id}", workspace="/ws",
                          **kw)
    [rec] = store.append(SCHEDULES_STREAM, [event])
    return rec


def test_schedules_come_in_the_order_added_with_when_and_without_the_removed_unless_asked(store) -> None:
    first = add(store, "s-1", allowed_effects=("read", "write"), timezone="Europe/Amsterdam")
    add(store, "s-2")
    add(store, "s-3")
    store.append(SCHEDULES_STREAM, [ScheduleRemoved(schedule_id="s-2")])
    with store.reading() as conn:
        assert [a.schedule.schedule_id for a in schedules.list_schedules(conn)] == ["s-1", "s-3"]
        every = schedules.list_schedules(conn, include_removed=True)
        assert [(a.schedule.schedule_id, a.schedule.removed_seq is not None) for a in every] == [
            ("s-1", False), ("s-2", True), ("s-3", False)
        ]
        one = schedules.load_schedule(conn, "s-1")
        assert schedules.load_schedule(conn, "s-9") is None
    assert one == schedules.Added(Schedule(
        "s-1", "0 9 * * *", "Europe/Amsterdam", "goal of s-1", "/ws", "workspace", "default", "read,write",
        first.seq, None, 0, None, None,
    ), first.recorded_at)


def test_a_firing_whose_task_was_never_submitted_is_unsubmitted_and_removal_does_not_hide_it(store) -> None:
    add(store, "s-1")
    add(store, "s-2")
    add(store, "s-3")
    store.append(SCHEDULES_STREAM, [ScheduleFired(schedule_id="s-1", fire_time="2030-01-01T09:00:00+00:00",
                                                  task_id="t-1")])
    submit(store, "t-1")
    store.append(SCHEDULES_STREAM, [ScheduleFired(schedule_id="s-2", fire_time="2030-01-01T09:00:00+00:00",
                                                  task_id="t-2")])
    store.append(SCHEDULES_STREAM, [ScheduleRemoved(schedule_id="s-2")])
    with store.reading() as conn:
        [lacking] = (a.schedule for a in schedules.unsubmitted(conn))
        fired = schedules.load_schedule(conn, "s-1").schedule
    assert (lacking.schedule_id, lacking.last_task_id, lacking.removed_seq is not None, lacking.fired) == (
        "s-2", "t-2", True, 1
    )
    assert (fired.fired, fired.last_fire_time) == (1, "2030-01-01T09:00:00+00:00")


# -- tasks and approvals -------------------------------------------------------------------------


def test_a_tasks_standing_is_its_phase_and_stream_version(store) -> None:
    submit(store, "t-1")
    with store.reading() as conn:
        assert tasks.standing(conn, "t-1") == (TaskPhase.SUBMITTED.value, 1)
        assert tasks.standing(conn, "t-9") is None


def test_the_newest_summaries_come_first_and_stop_at_the_limit(store) -> None:
    for n in range(1, 5):
        submit(store, f"t-{n}")
    with store.reading() as conn:
        assert [s.task_id for s in tasks.newest_summaries(conn, 3)] == ["t-4", "t-3", "t-2"]
        [newest] = tasks.newest_summaries(conn, 1)
    assert (newest.goal, newest.phase, newest.version) == ("goal of t-4", TaskPhase.SUBMITTED.value, 1)


def request(store: EventStore, task_id: str, approval_id: str) -> None:
    store.append(task_id, [ApprovalRequested(approval_id=approval_id, call_id="c1", tool="shell", arguments_hash="h")])


def test_pending_approvals_are_counted_and_the_latest_decisions_come_newest_first(store) -> None:
    submit(store, "t-1")
    for a in ("a-1", "a-2", "a-3", "a-4"):
        request(store, "t-1", a)
    [denied] = store.append("t-1", [ApprovalDenied(approval_id="a-2", by="bob", reason="too broad")])
    [granted] = store.append("t-1", [ApprovalGranted(approval_id="a-1", by="ann")])
    with store.reading() as conn:
        assert approvals.count_pending(conn) == 2
        assert approvals.recently_decided(conn, 10) == [
            approvals.Decided("a-1", "t-1", "shell", "granted", "ann", "", granted.recorded_at),
            approvals.Decided("a-2", "t-1", "shell", "denied", "bob", "too broad", denied.recorded_at),
        ]
        assert [d.approval_id for d in approvals.recently_decided(conn, 1)] == ["a-1"]

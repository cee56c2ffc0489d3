"""Reads of the `jobs` table: whether a job is recorded, and the jobs that did or did not finish."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, select

from store.tables import jobs


class UnfinishedJob(NamedTuple):
    job_id: str
    task_id: str
    command: str


class FinishedJob(NamedTuple):
    job_id: str
    task_id: str
    command: str
    finished_seq: int


def job_recorded(conn: Connection, job_id: str) -> bool:
    """Whether the job's `JobStarted` is in the log."""
    return conn.execute(select(jobs.c.job_id).where(jobs.c.job_id == job_id)).first() is not None


def unfinished_jobs(conn: Connection) -> list[UnfinishedJob]:
    """Jobs recorded as started and not as finished."""
    rows = conn.execute(select(jobs.c.job_id, jobs.c.task_id, jobs.c.command).where(jobs.c.finished_seq.is_(None)))
    return [UnfinishedJob(*row) for row in rows]


def finished_jobs(conn: Connection) -> list[FinishedJob]:
    """Jobs recorded as finished, with the seq of their `JobFinished`."""
    rows = conn.execute(
        select(jobs.c.job_id, jobs.c.task_id, jobs.c.command, jobs.c.finished_seq)
        .where(jobs.c.finished_seq.is_not(None))
    )
    return [FinishedJob(*row) for row in rows]

"""Moments a memory is bound by: read from what a person types, kept and compared in UTC."""

from __future__ import annotations

from datetime import UTC, datetime

from runtime.errors import InvalidCommand


def utc(moment: datetime) -> datetime:
    """The same moment in UTC; a naive one is taken as UTC already, as every time in the log is."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse(text: str, what: str) -> datetime:
    """A date (midnight UTC that day) or an ISO 8601 datetime; `what` names it in the one-line refusal."""
    try:
        return utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise InvalidCommand(f"{what} {text!r} is not a date (YYYY-MM-DD) or an ISO 8601 datetime") from None


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else utc(moment).isoformat()

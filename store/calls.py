"""A task's tool calls as the log tells them, and the one step that folds a call event into its call.

The live projector (against its `tool_calls` rows) and the in-memory fold (against what it has folded)
both advance a call with these functions, so an append, an import and a replay refuse the same events:
a start or a result for a call never proposed, a second result, a second start the live path would not
have made.
"""

from __future__ import annotations

from typing import NamedTuple

from store import rules
from store.events import Recorded, ToolCallExecuted, ToolCallProposed, ToolCallStarted

CALL_EVENTS = (ToolCallProposed, ToolCallStarted, ToolCallExecuted)

_new = tuple.__new__


class ToolCall(NamedTuple):
    """One row of `tool_calls`: where the call stands after the events folded so far."""

    call_id: str
    tool: str
    proposed_seq: int
    # The latest start, and whether that start's tool may simply run again.
    started_seq: int | None = None
    idempotent: bool | None = None
    # The latest approval granted for the call: what lets a call that is not idempotent start again.
    granted_seq: int | None = None
    finished_seq: int | None = None
    status: str | None = None


def advance(prior: ToolCall | None, rec: Recorded) -> ToolCall:
    """The call after one of CALL_EVENTS; raises StoreError where the live path would never write it."""
    e = rec.event
    kind = type(e)
    # Built positionally with tuple.__new__, as store/state.py builds its rows: _replace costs several
    # times as much, and every proposal and result of every append comes here.
    if kind is ToolCallProposed:
        rules.call_proposed(prior, rec.stream_id, e.call_id, rec.seq)
        return _new(ToolCall, (e.call_id, e.tool, rec.seq, None, None, None, None, None))
    if kind is ToolCallStarted:
        rules.call_started(prior, rec.stream_id, e.call_id, e.tool, rec.seq)
        call_id, tool, proposed, _, _, granted, finished, status = prior
        return _new(ToolCall, (call_id, tool, proposed, rec.seq, e.idempotent, granted, finished, status))
    rules.call_finished(prior, rec.stream_id, e.call_id, e.tool, rec.seq)
    call_id, tool, proposed, started, idempotent, granted, _, _ = prior
    return _new(ToolCall, (call_id, tool, proposed, started, idempotent, granted, rec.seq, e.status))


def approved(prior: ToolCall | None, seq: int) -> ToolCall | None:
    """The call after an approval for it was granted at `seq`; None where no such call was proposed
    (an approval may name a call the log never proposed, and the rules of approvals are their own)."""
    return None if prior is None else prior._replace(granted_seq=seq)

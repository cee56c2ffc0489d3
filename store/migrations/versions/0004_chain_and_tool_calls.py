"""The chain of hashes over the log, and each task's tool calls as a projection the fold checks.

Existing rows are hashed here rather than on first open: the migration runs once, under the write lock
and in the transaction that adds the column, so every database at this revision has a whole chain and
nothing needs to know of a half-hashed log (a read-only command could not hash it anyway). The tool
calls already in the log are folded in here too, so a call proposed before the upgrade may start and
finish after it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import json

import sqlalchemy as sa
from alembic import op

from store.chain import GENESIS, link

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

CHUNK = 5000
COLUMNS = (
    "seq", "stream_id", "stream_version", "type", "schema_version", "payload", "recorded_at", "actor",
    "causation_id", "correlation_id",
)
CALL_TYPES = ("ToolCallProposed", "ToolCallStarted", "ToolCallExecuted", "ApprovalRequested", "ApprovalGranted")


def upgrade() -> None:
    op.add_column("events", sa.Column("hash", sa.String(64), nullable=True))
    op.create_table(
        "tool_calls",
        sa.Column("task_id", sa.String(200), sa.ForeignKey("tasks.task_id"), nullable=False),
        sa.Column("call_id", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("proposed_seq", sa.BigInteger(), nullable=False),
        sa.Column("started_seq", sa.BigInteger(), nullable=True),
        sa.Column("idempotent", sa.Boolean(), nullable=True),
        sa.Column("granted_seq", sa.BigInteger(), nullable=True),
        sa.Column("finished_seq", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("task_id", "call_id"),
        sqlite_with_rowid=False,
    )
    bind = op.get_bind()
    _updating_events(bind, True)
    _chain(bind)
    _updating_events(bind, False)
    _fill_tool_calls(bind)


def _chain(bind) -> None:
    """Hash every row in seq order, a chunk at a time (keyset paging: the table is being updated)."""
    select = f"SELECT {', '.join(COLUMNS)} FROM events WHERE seq > :after ORDER BY seq LIMIT {CHUNK}"
    update = sa.text("UPDATE events SET hash = :hash WHERE seq = :seq")
    prev, after = GENESIS, 0
    while rows := bind.execute(sa.text(select), {"after": after}).fetchall():
        hashes = []
        for row in rows:
            prev = link(prev, tuple(row))
            hashes.append({"hash": prev, "seq": row[0]})
        bind.execute(update, hashes)
        after = rows[-1][0]


def _updating_events(bind, allowed: bool) -> None:
    """The log refuses updates (migration 0001); this one fills in a column nothing had yet."""
    if bind.dialect.name == "sqlite":
        if allowed:
            op.execute("DROP TRIGGER events_no_update")
        else:
            op.execute(
                "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
                "BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END"
            )
    else:
        op.execute(f"ALTER TABLE events {'DISABLE' if allowed else 'ENABLE'} TRIGGER events_append_only")


def _fill_tool_calls(bind) -> None:
    """Fold the calls already in the log into rows, leniently: a migration must not make a database
    unusable, so what the rules would refuse is passed over here, and replay names it."""
    tasks = {r[0] for r in bind.execute(sa.text("SELECT task_id FROM tasks"))}
    calls: dict[tuple[str, str], dict] = {}
    approvals: dict[str, tuple[str, str]] = {}
    rows = bind.execute(
        sa.text("SELECT seq, stream_id, type, payload FROM events WHERE type IN :types ORDER BY seq").bindparams(
            sa.bindparam("types", expanding=True)
        ),
        {"types": list(CALL_TYPES)},
    )
    for seq, task, type_name, payload in rows:
        if task not in tasks:
            continue
        e = json.loads(payload)
        if type_name == "ApprovalRequested":
            approvals.setdefault(e["approval_id"], (task, e["call_id"]))
            continue
        key = approvals.get(e["approval_id"]) if type_name == "ApprovalGranted" else (task, e["call_id"])
        call = calls.get(key)
        if type_name == "ToolCallProposed" and call is None:
            calls[key] = {"task_id": task, "call_id": e["call_id"], "tool": e["tool"], "proposed_seq": seq,
                          "started_seq": None, "idempotent": None, "granted_seq": None, "finished_seq": None,
                          "status": None}
        elif call is None:
            continue
        elif type_name == "ApprovalGranted":
            call["granted_seq"] = seq
        elif type_name == "ToolCallStarted":
            call.update(started_seq=seq, idempotent=bool(e.get("idempotent")))
        elif type_name == "ToolCallExecuted" and call["finished_seq"] is None:
            call.update(finished_seq=seq, status=e.get("status"))
    if calls:
        table = sa.table("tool_calls", *(sa.column(c) for c in next(iter(calls.values()))))
        bind.execute(table.insert(), list(calls.values()))


def downgrade() -> None:
    op.drop_table("tool_calls")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("hash")
    if op.get_bind().dialect.name == "sqlite":
        # Copying the table for the dropped column dropped its triggers with it.
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER IF NOT EXISTS events_no_{verb.lower()} BEFORE {verb} ON events "
                f"BEGIN SELECT RAISE(ABORT, 'events are append-only: {verb} refused'); END"
            )

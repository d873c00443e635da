"""published_agents_booking_caps: calls run the published agent; calendars cap bookings; rules end at 24:00

* ``agents.has_unpublished_changes``: whether the draft differs from the latest published version (which every
  call runs). An agent never published has changes to publish; for the others the migration cannot compare
  drafts, so an agent changed after its last publication is marked as having changes (a status change alone
  counts too: publishing again clears it).
* ``calls.agent_version`` and ``call_logs.agent_version``: the published version a call runs (null for the calls
  of before).
* ``calendars.max_upcoming_per_attendee`` (3 for every calendar, as for new ones; null: no cap) and
  ``calendars.max_bookings_per_day`` (null: no cap).
* ``availability_rules``: ``end_minute`` may be 1440, a rule that runs until 24:00 (the check constraint
  ``ck_availability_rules_window`` is replaced; on SQLite the table is rebuilt in batch mode, keeping its ids
  never reused, its index and the calendar revision triggers of 0006).

Revision ID: 0290
Revises: 0280
Create Date: 2026-11-27 06:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0290"
down_revision = "0280"
branch_labels = None
depends_on = ("0003", "0005", "0006", "0008")  # calendars and rules, calls, the revision triggers, AUTOINCREMENT

RULES = "availability_rules"
WINDOW = "ck_availability_rules_window"
OLD_WINDOW = "start_minute >= 0 AND end_minute <= 1439 AND start_minute < end_minute"
NEW_WINDOW = "start_minute >= 0 AND end_minute <= 1440 AND start_minute < end_minute"

_MARK_CHANGED = sa.text(
    "UPDATE agents SET has_unpublished_changes = CASE WHEN EXISTS (SELECT 1 FROM agent_versions v "
    "WHERE v.agent_id = agents.id AND v.version = agents.current_version AND v.created_at >= agents.updated_at) "
    "THEN FALSE ELSE TRUE END")


def _sqlite_objects(kind: str) -> list[tuple[str, str]]:
    """(name, sql) of the explicit indexes or triggers of the rules table, as SQLite keeps them."""
    rows = op.get_bind().execute(sa.text(
        "SELECT name, sql FROM sqlite_master WHERE type = :kind AND tbl_name = :table AND sql IS NOT NULL "
        "ORDER BY name"), {"kind": kind, "table": RULES}).all()
    return [(name, sql) for name, sql in rows]


def _replace_window(old: str, new: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint(op.f(WINDOW), RULES, type_="check")
        op.create_check_constraint(op.f(WINDOW), RULES, new)
        return
    triggers, indexes = _sqlite_objects("trigger"), _sqlite_objects("index")
    for name, _ in triggers:
        op.execute(f'DROP TRIGGER "{name}"')
    for name, _ in indexes:
        op.execute(f'DROP INDEX "{name}"')
    with op.batch_alter_table(RULES, recreate="always", table_kwargs={"sqlite_autoincrement": True}) as batch:
        batch.drop_constraint(op.f(WINDOW), type_="check")
        batch.create_check_constraint(op.f(WINDOW), new)
    for _, sql in indexes:
        op.execute(sql)
    for _, sql in triggers:
        op.execute(sql)
    broken = op.get_bind().execute(sa.text("PRAGMA foreign_key_check")).all()
    if broken:
        raise RuntimeError(f"foreign keys broken by the rebuild: {broken[:10]}")


def upgrade() -> None:
    op.add_column("agents", sa.Column("has_unpublished_changes", sa.Boolean(), nullable=False,
                                      server_default=sa.true()))
    op.execute(_MARK_CHANGED)
    op.add_column("calls", sa.Column("agent_version", sa.Integer(), nullable=True))
    op.add_column("call_logs", sa.Column("agent_version", sa.Integer(), nullable=True))
    op.add_column("calendars", sa.Column("max_upcoming_per_attendee", sa.Integer(), nullable=True,
                                         server_default=sa.text("3")))
    op.add_column("calendars", sa.Column("max_bookings_per_day", sa.Integer(), nullable=True))
    _replace_window(OLD_WINDOW, NEW_WINDOW)


def downgrade() -> None:
    # a rule that ends at 24:00 ends at 23:59 again, as before
    op.execute(sa.text(f"UPDATE {RULES} SET end_minute = 1439 WHERE end_minute = 1440"))
    _replace_window(NEW_WINDOW, OLD_WINDOW)
    for table, column in (("calendars", "max_bookings_per_day"), ("calendars", "max_upcoming_per_attendee"),
                          ("call_logs", "agent_version"), ("calls", "agent_version"),
                          ("agents", "has_unpublished_changes")):
        op.drop_column(table, column)  # a plain DROP COLUMN on both databases

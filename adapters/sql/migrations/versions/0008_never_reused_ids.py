"""never reused ids, one organization per phone number

* SQLite: every table whose integer ``id`` is handed to clients is rebuilt with ``INTEGER PRIMARY KEY
  AUTOINCREMENT``, so an id freed by a hard delete is never handed out again (a plain rowid alias reuses the
  largest id once its row is gone). Rows, indexes (partial ones included) and triggers (the calendar revision
  triggers of 0006) are kept. PostgreSQL ids come from sequences (BIGSERIAL), which never go back: unchanged.
* ``telephony_numbers``: a number belongs to one organization at a time, ``uq_telephony_numbers_phone_number``
  replaces the per-organization ``uq_telephony_numbers_organization_id_phone_number``. The upgrade stops, changing
  nothing, when a number is held by several organizations already (release the extra claims, then migrate).

* ``ix_appointments_calendar_id_outcome_slot_end``: completed and no_show appointments stay busy time for
  availability (an outcome never frees a slot); this partial index finds them.

A merge of the feature branches whose tables it rebuilds.

Revision ID: 0008
Revises: 0002, 0004, 0005, 0006, 0100
Create Date: 2026-11-23 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = ("0002", "0004", "0005", "0006", "0100")
branch_labels = None
depends_on = None

# every table with an integer id a client sees (or that a client-visible id refers to)
TABLES = (
    "organizations", "api_keys", "users", "agents", "agent_versions", "outbox_events",
    "webhook_subscriptions", "webhook_deliveries", "webhook_attempts",
    "calendars", "availability_rules", "blackouts", "appointments",
    "knowledge_bases", "documents", "document_chunks",
    "call_logs", "usage_records", "dnc_lists", "telephony_providers", "telephony_numbers",
)
NUMBERS = "telephony_numbers"
OLD_NUMBER_KEY = "uq_telephony_numbers_organization_id_phone_number"
NEW_NUMBER_KEY = "uq_telephony_numbers_phone_number"
OUTCOME_INDEX = "ix_appointments_calendar_id_outcome_slot_end"
OUTCOME_CONDITION = "status IN ('completed', 'no_show')"


def _refuse_shared_numbers() -> None:
    shared = op.get_bind().execute(sa.text(
        "SELECT phone_number FROM telephony_numbers GROUP BY phone_number "
        "HAVING count(DISTINCT organization_id) > 1 ORDER BY phone_number")).scalars().all()
    if shared:
        raise RuntimeError(
            "these phone numbers are held by several organizations; delete the extra claims "
            f"(DELETE FROM telephony_numbers WHERE id = ...) and run the migration again: {', '.join(shared)}")


def _sqlite_objects(kind: str, tables: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    """(name, sql) of the explicit indexes or triggers (of ``tables``, or all), as SQLite keeps them."""
    rows = op.get_bind().execute(sa.text(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = :kind AND sql IS NOT NULL ORDER BY name"),
        {"kind": kind}).all()
    return [(name, sql) for name, table, sql in rows if tables is None or table in tables]


def _rebuild_sqlite(autoincrement: bool, number_key: tuple[str, list[str]], old_key: str) -> None:
    """Recreate each table (batch mode) with or without AUTOINCREMENT. Triggers (which name other tables in
    their bodies) and explicit indexes (batch mode would lose a partial index's WHERE) are dropped first and
    put back verbatim afterwards; the migration runs with foreign keys off (env.py) and checks them at the end."""
    bind = op.get_bind()
    existing = set(sa.inspect(bind).get_table_names())
    tables = tuple(t for t in TABLES if t in existing)
    triggers = _sqlite_objects("trigger")
    indexes = _sqlite_objects("index", tables)
    for name, _ in triggers:
        op.execute(f'DROP TRIGGER "{name}"')
    for name, _ in indexes:
        op.execute(f'DROP INDEX "{name}"')
    for table in tables:
        with op.batch_alter_table(table, recreate="always",
                                  table_kwargs={"sqlite_autoincrement": autoincrement}) as batch:
            if table == NUMBERS:
                batch.drop_constraint(old_key, type_="unique")
                batch.create_unique_constraint(number_key[0], number_key[1])
    for _, sql in indexes:
        op.execute(sql)
    for _, sql in triggers:
        op.execute(sql)
    broken = bind.execute(sa.text("PRAGMA foreign_key_check")).all()
    if broken:
        raise RuntimeError(f"foreign keys broken by the rebuild: {broken[:10]}")


def upgrade() -> None:
    _refuse_shared_numbers()
    op.create_index(OUTCOME_INDEX, "appointments", ["calendar_id", "slot_end"],
                    sqlite_where=sa.text(OUTCOME_CONDITION), postgresql_where=sa.text(OUTCOME_CONDITION))
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite(True, (NEW_NUMBER_KEY, ["phone_number"]), OLD_NUMBER_KEY)
        return
    op.drop_constraint(OLD_NUMBER_KEY, NUMBERS, type_="unique")
    op.create_unique_constraint(NEW_NUMBER_KEY, NUMBERS, ["phone_number"])


def downgrade() -> None:
    op.drop_index(OUTCOME_INDEX, "appointments")
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite(False, (OLD_NUMBER_KEY, ["organization_id", "phone_number"]), NEW_NUMBER_KEY)
        return
    op.drop_constraint(NEW_NUMBER_KEY, NUMBERS, type_="unique")
    op.create_unique_constraint(OLD_NUMBER_KEY, NUMBERS, ["organization_id", "phone_number"])

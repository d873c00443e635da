"""calendar revision: a token that changes in every transaction that changes what availability reads

``calendars.revision`` takes a new, never reused value whenever a row of ``appointments``,
``availability_rules`` or ``blackouts`` of the calendar is inserted, updated or deleted. Triggers set it,
so no writer can forget; the SQL adapter caches a calendar's schedule under this token.

Revision ID: 0006
Revises: 0003
Create Date: 2026-11-22 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLES = ("appointments", "availability_rules", "blackouts")

_PG_FUNCTION = """
CREATE FUNCTION bump_calendar_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE calendars SET revision = nextval('calendar_revisions') WHERE id = OLD.calendar_id;
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.calendar_id IS DISTINCT FROM OLD.calendar_id) THEN
        UPDATE calendars SET revision = nextval('calendar_revisions') WHERE id = NEW.calendar_id;
    END IF;
    RETURN NULL;
END
$$
"""


def _upgrade_postgresql() -> None:
    op.execute("CREATE SEQUENCE calendar_revisions AS bigint")
    op.add_column("calendars", sa.Column("revision", sa.BigInteger(), nullable=False,
                                         server_default=sa.text("nextval('calendar_revisions')")))
    op.execute(_PG_FUNCTION)
    for table in TABLES:
        op.execute(f"CREATE TRIGGER trg_{table}_calendar_revision AFTER INSERT OR UPDATE OR DELETE ON {table} "
                   "FOR EACH ROW EXECUTE FUNCTION bump_calendar_revision()")


def _upgrade_sqlite() -> None:
    # SQLite cannot add a column with a non-constant default: new rows get theirs from a trigger
    op.add_column("calendars", sa.Column("revision", sa.BigInteger(), nullable=False, server_default=sa.text("0")))
    op.execute("UPDATE calendars SET revision = random()")
    op.execute("CREATE TRIGGER trg_calendars_revision AFTER INSERT ON calendars "
               "BEGIN UPDATE calendars SET revision = random() WHERE id = NEW.id; END")
    bump = "UPDATE calendars SET revision = random() WHERE id = {row}.calendar_id;"
    for table in TABLES:
        op.execute(f"CREATE TRIGGER trg_{table}_revision_insert AFTER INSERT ON {table} "
                   f"BEGIN {bump.format(row='NEW')} END")
        op.execute(f"CREATE TRIGGER trg_{table}_revision_update AFTER UPDATE ON {table} "
                   f"BEGIN {bump.format(row='OLD')} {bump.format(row='NEW')} END")
        op.execute(f"CREATE TRIGGER trg_{table}_revision_delete AFTER DELETE ON {table} "
                   f"BEGIN {bump.format(row='OLD')} END")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _upgrade_postgresql()
    else:
        _upgrade_sqlite()


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER trg_{table}_calendar_revision ON {table}")
        op.execute("DROP FUNCTION bump_calendar_revision()")
        op.drop_column("calendars", "revision")
        op.execute("DROP SEQUENCE calendar_revisions")
        return
    op.execute("DROP TRIGGER trg_calendars_revision")
    for table in TABLES:
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER trg_{table}_revision_{event}")
    with op.batch_alter_table("calendars") as batch:
        batch.drop_column("revision")

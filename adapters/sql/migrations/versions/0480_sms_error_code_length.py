"""sms_error_code_length: ``sms_messages.error_code`` holds 50 characters (was 20)

A carrier's code is kept up to 50 characters (``SendSms``), and Parley's own ``provider_not_supported`` (a text from
a number whose provider has no adapter) is 22. On PostgreSQL the column is widened in place (``ALTER COLUMN ... TYPE
varchar(50)``: no rewrite, no lock beyond a moment's); SQLite does not enforce a VARCHAR's length, so its table is
left as it is (a rebuild would buy nothing).

Revision ID: 0480
Revises: 0470
Create Date: 2026-11-30 01:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0480"
down_revision = "0470"
branch_labels = None
depends_on = ("0150",)  # sms: the messages table


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("sms_messages", "error_code", type_=sa.String(50), existing_type=sa.String(20),
                        existing_nullable=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("UPDATE sms_messages SET error_code = left(error_code, 20) WHERE length(error_code) > 20")
        op.alter_column("sms_messages", "error_code", type_=sa.String(20), existing_type=sa.String(50),
                        existing_nullable=True)

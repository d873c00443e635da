"""call_log_turns_analysis: a conversation's latency per turn and its after-call analysis on the call log

call_logs.turns: [{end_of_speech_to_first_audio_ms, stt_ms, llm_first_token_ms, tts_first_audio_ms, parley_ms}];
call_logs.analysis: {summary, successful, data}. Both null for the calls before them and for calls that had no
conversation runtime (the API shows turns [] and analysis null).

Revision ID: 0415
Revises: 0400
Create Date: 2026-11-27 09:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0415"
down_revision = "0400"
branch_labels = None
depends_on = None

Json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    # plain nullable ADD COLUMNs on both databases: nothing to fill in
    op.add_column("call_logs", sa.Column("turns", Json, nullable=True))
    op.add_column("call_logs", sa.Column("analysis", Json, nullable=True))


def downgrade() -> None:
    op.drop_column("call_logs", "analysis")  # SQLite drops a plain column in place (no rebuild)
    op.drop_column("call_logs", "turns")

"""Media streams on SQL: single-use stream tokens (``media_stream_tokens``), and on PostgreSQL the controls sent to
live sessions (``NOTIFY parley_media``) and the listener that delivers them to this process's sessions."""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import msgspec
import sqlalchemy as sa

from adapters.sql.jobs import JobListener
from adapters.sql.media_tables import media_stream_tokens
from adapters.sql.uow import SqlUnitOfWork
from application.ports.media import SessionControl, StreamGrant

log = logging.getLogger("parley.media")

CONTROL_CHANNEL = "parley_media"
DEFAULT_TTL_SECONDS = 900


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class SqlMediaStreamTokens:
    """Tokens of 43 URL-safe characters (256 random bits); only their SHA-256 is stored."""

    def __init__(self, uow: SqlUnitOfWork, ttl_seconds: int = DEFAULT_TTL_SECONDS) -> None:
        self.uow, self.ttl = uow, timedelta(seconds=ttl_seconds)

    async def issue(self, call_id: str, organization_id: int, now: datetime) -> str:
        token = secrets.token_urlsafe(32)
        conn = await self.uow.connection()
        await conn.execute(media_stream_tokens.insert().values(
            token_hash=token_hash(token), organization_id=organization_id, call_id=call_id,
            expires_at=now + self.ttl, redeemed_at=None, created_at=now))
        return token

    async def redeem(self, token: str, now: datetime) -> StreamGrant | None:
        table = media_stream_tokens
        conn = await self.uow.connection()
        # one conditional UPDATE: of two redeems of one token at once, one changes the row, the other nothing
        row = (await conn.execute(
            table.update()
            .where(table.c.token_hash == token_hash(token), table.c.redeemed_at.is_(None), table.c.expires_at > now)
            .values(redeemed_at=now)
            .returning(table.c.call_id, table.c.organization_id, table.c.expires_at))).first()
        return StreamGrant(row.call_id, int(row.organization_id), row.expires_at) if row is not None else None

    async def purge(self, before: datetime) -> int:
        """Forget the tokens that expired before ``before``."""
        conn = await self.uow.connection()
        result = await conn.execute(media_stream_tokens.delete().where(media_stream_tokens.c.expires_at < before))
        return int(result.rowcount or 0)


_payloads = msgspec.json.Encoder()
_reader = msgspec.json.Decoder()


def encode_control(call_id: str, control: SessionControl) -> str:
    return _payloads.encode({"call_id": call_id, "command": control.command, "details": control.details}).decode()


def decode_control(payload: str) -> tuple[str, SessionControl] | None:
    try:
        message = _reader.decode(payload)
        return str(message["call_id"]), SessionControl(message["command"], 0, dict(message.get("details") or {}))
    except (msgspec.DecodeError, KeyError, TypeError, ValueError):
        return None


class NotifyCallControl:
    """:class:`application.ports.media.LiveCallControl` on PostgreSQL: ``NOTIFY parley_media`` in the caller's
    transaction (sent when it commits), heard by every serve process's :func:`listen_for_controls`."""

    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def send(self, organization_id: int, call_id: str, control: SessionControl) -> None:
        conn = await self.uow.connection()
        await conn.execute(sa.select(sa.func.pg_notify(CONTROL_CHANNEL, encode_control(call_id, control))))


async def listen_for_controls(engine: Any, deliver: Callable[[str, SessionControl], object]) -> JobListener | None:
    """PostgreSQL: LISTEN on ``parley_media`` and hand each control to ``deliver(call_id, control)`` (close the
    listener to stop). None on SQLite."""
    if engine.dialect.name != "postgresql":
        return None

    def received(payload: str) -> None:
        read = decode_control(payload)
        if read is None:
            log.warning("a media control notification that is not one was ignored")
            return
        deliver(*read)

    listener = JobListener(engine, lambda: None, channel=CONTROL_CHANNEL, on_payload=received)
    await listener.start()
    return listener

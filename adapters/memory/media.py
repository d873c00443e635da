"""Media-stream tokens in memory (hashes, single use, expiry), as on SQL."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.media import StreamGrant

TOKENS = "media_stream_tokens"


class InMemoryMediaStreamTokens:
    def __init__(self, uow: InMemoryUnitOfWork, ttl_seconds: int = 900) -> None:
        self.uow, self.ttl = uow, timedelta(seconds=ttl_seconds)

    async def issue(self, call_id: str, organization_id: int, now: datetime) -> str:
        token = secrets.token_urlsafe(32)
        (await self.uow.tables())[TOKENS][hashlib.sha256(token.encode()).hexdigest()] = {
            "call_id": call_id, "organization_id": organization_id, "expires_at": now + self.ttl,
            "redeemed_at": None}
        return token

    async def redeem(self, token: str, now: datetime) -> StreamGrant | None:
        row = (await self.uow.tables())[TOKENS].get(hashlib.sha256(token.encode()).hexdigest())
        if row is None or row["redeemed_at"] is not None or row["expires_at"] <= now:
            return None
        row["redeemed_at"] = now
        return StreamGrant(row["call_id"], row["organization_id"], row["expires_at"])

    async def purge(self, before: datetime) -> int:
        """Forget the tokens that expired before ``before``."""
        tokens = (await self.uow.tables())[TOKENS]
        expired = [key for key, row in tokens.items() if row["expires_at"] < before]
        for key in expired:
            del tokens[key]
        return len(expired)

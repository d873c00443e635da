"""Dashboard users as their organization manages them, and the one-time links sent to them by email: an
invitation (48 hours) and a password reset (1 hour). A link's token is random; only its SHA-256 is stored, and a
link opens once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from domain.roles import Role

TOKEN_BYTES = 32


class LinkKind(StrEnum):
    INVITATION = "invitation"
    PASSWORD_RESET = "password_reset"


LIFETIMES = {LinkKind.INVITATION: timedelta(hours=48), LinkKind.PASSWORD_RESET: timedelta(hours=1)}


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class UserAccount:
    id: int
    organization_id: int
    email: str
    role: Role
    created_at: datetime | None = None
    mfa_enabled_at: datetime | None = None
    """When two-factor sign-in (TOTP) was turned on; None: off."""

    @property
    def mfa(self) -> bool:
        return self.mfa_enabled_at is not None


@dataclass(frozen=True, slots=True)
class OneTimeLink:
    """An invitation (``email`` and ``role`` to join with) or a password reset (``user_id``)."""

    id: int | None
    organization_id: int
    kind: LinkKind
    token_hash: str
    email: str
    role: Role
    user_id: int | None
    created_by: int | None
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None

    def usable(self, now: datetime) -> bool:
        return self.used_at is None and now < self.expires_at

"""Dashboard sessions: the rules of their life (idle and absolute expiry) and how a session id is kept.

A session id is a random secret handed to the browser in a cookie; only its SHA-256 is stored, so a copy of the
database opens no session. A session ends ``idle`` after its last use (up to ``TOUCH_PRECISION`` later, never
earlier: see ``Session.expires_at``) or ``absolute`` after it was opened, whichever comes first.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

ID_BYTES = 32  # 256 bits of randomness in a session id
CSRF_BYTES = 32
IDLE = timedelta(minutes=30)
ABSOLUTE = timedelta(hours=12)
TOUCH_PRECISION = timedelta(minutes=1)  # last use is written at most once a minute per session
SUDO = timedelta(minutes=5)
"""How long after its user last proved itself (sign-in, password or code asked again) a session may mint an API
key, change billing or manage users without being asked again."""


def digest(session_id: str) -> str:
    """What the store keeps of a session id (and looks it up by)."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def same_token(expected: str, presented: str | None) -> bool:
    """Constant-time comparison of a CSRF token (None, or an empty string, never matches)."""
    return bool(presented) and hmac.compare_digest(expected.encode("utf-8"), (presented or "").encode("utf-8"))


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    idle: timedelta = IDLE
    absolute: timedelta = ABSOLUTE


@dataclass(frozen=True, slots=True)
class Session:
    id_hash: str
    user_id: int
    organization_id: int
    csrf_token: str
    created_at: datetime
    last_seen_at: datetime
    verified_at: datetime | None = None
    """When its user last gave the password or a code (None: at sign-in, ``created_at``)."""
    acting_organization_id: int | None = None
    """The client (a sub-organization of the user's partner organization) the session works in, as an API key
    with ``X-Sub-Org-Id`` does; None: the user's own organization."""

    def recently_verified(self, now: datetime, window: timedelta = SUDO) -> bool:
        return now - (self.verified_at or self.created_at) < window

    def expires_at(self, policy: SessionPolicy) -> datetime:
        """When the session ends if it is not used again: ``idle`` after its last use, never earlier. The stored
        last use is written at most once a ``TOUCH_PRECISION``, so a use after it may not have been written; it
        was less than ``TOUCH_PRECISION`` later, so the idle end counts from the stored last use plus that."""
        return min(self.last_seen_at + TOUCH_PRECISION + policy.idle, self.created_at + policy.absolute)

    def is_live(self, now: datetime, policy: SessionPolicy) -> bool:
        return now < self.expires_at(policy)

    def needs_touch(self, now: datetime) -> bool:
        return now - self.last_seen_at >= TOUCH_PRECISION

    def seen(self, now: datetime) -> Session:
        return replace(self, last_seen_at=now)

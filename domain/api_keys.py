"""API key format and lifecycle rules.

A key is ``parley_sk_`` + 32 base62 characters + a 6-character base62 CRC32 checksum, so a
mistyped or truncated key is rejected without a database read. Only the SHA-256 of the whole
key is ever stored.
"""

from __future__ import annotations

import hashlib
import string
import zlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from domain.errors import ValidationFailed

PREFIX = "parley_sk_"
SECRET_LENGTH = 32
CHECKSUM_LENGTH = 6
KEY_LENGTH = len(PREFIX) + SECRET_LENGTH + CHECKSUM_LENGTH
BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_BASE62_SET = frozenset(BASE62)
EXPIRY_NOTICE = timedelta(days=7)
MIN_GRACE_HOURS, MAX_GRACE_HOURS, DEFAULT_GRACE_HOURS = 1, 168, 24


def _base62(number: int, width: int) -> str:
    chars = []
    for _ in range(width):
        number, rem = divmod(number, 62)
        chars.append(BASE62[rem])
    return "".join(reversed(chars))


def checksum(secret: str) -> str:
    return _base62(zlib.crc32(secret.encode("ascii")), CHECKSUM_LENGTH)


def compose(secret: str) -> str:
    """The full key for a 32-character base62 secret."""
    if len(secret) != SECRET_LENGTH or not set(secret) <= _BASE62_SET:
        raise ValueError("secret must be 32 base62 characters")
    return f"{PREFIX}{secret}{checksum(secret)}"


def is_well_formed(key: str) -> bool:
    """Format and checksum check; needs no storage."""
    if len(key) != KEY_LENGTH or not key.startswith(PREFIX):
        return False
    body = key[len(PREFIX):]
    if not set(body) <= _BASE62_SET:
        return False
    secret, check = body[:SECRET_LENGTH], body[SECRET_LENGTH:]
    return checksum(secret) == check


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def display_prefix(key: str) -> str:
    return key[: len(PREFIX) + 4]


class KeyStatus(StrEnum):
    """The stored status of an API key (``expired`` is derived from ``expires_at``, never stored)."""

    ACTIVE = "active"
    REVOKED = "revoked"


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: int | None
    organization_id: int
    name: str
    prefix: str
    last_four: str
    key_hash: str
    scopes: tuple[str, ...]
    status: str  # a KeyStatus
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    lineage_id: int | None  # id of the first key of a rotation chain (its own id when new)
    rotated_to_id: int | None = None

    @property
    def lineage(self) -> int | None:
        """The rotation chain this key belongs to (a new key starts its own)."""
        return self.lineage_id or self.id

    def is_usable(self, now: datetime) -> bool:
        return self.status == KeyStatus.ACTIVE and (self.expires_at is None or now < self.expires_at)

    def expiry_notice(self, now: datetime) -> tuple[datetime, int] | None:
        """(expires_at, whole days left) when the key expires within seven days."""
        if self.expires_at is None or self.expires_at - now > EXPIRY_NOTICE:
            return None
        days = max(0, int((self.expires_at - now).total_seconds() // 86400))
        return self.expires_at, days

    def revoked(self) -> ApiKey:
        return replace(self, status="revoked")

    def display_status(self, now: datetime) -> str:
        if self.status == KeyStatus.REVOKED:
            return "revoked"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return "active"


def grace_period(hours: int | None) -> timedelta:
    value = DEFAULT_GRACE_HOURS if hours is None else hours
    if not MIN_GRACE_HOURS <= value <= MAX_GRACE_HOURS:
        raise ValidationFailed.field(
            "grace_period_hours", f"must be between {MIN_GRACE_HOURS} and {MAX_GRACE_HOURS}"
        )
    return timedelta(hours=value)

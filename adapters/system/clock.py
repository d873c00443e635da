from __future__ import annotations

import secrets
import string
import uuid
from datetime import UTC, datetime

_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class SystemRandom:
    """Cryptographically strong randomness."""

    _rng = secrets.SystemRandom()

    def base62(self, length: int) -> str:
        return "".join(secrets.choice(_BASE62) for _ in range(length))

    def hex(self, nbytes: int) -> str:
        return secrets.token_hex(nbytes)

    def token(self, nbytes: int) -> str:
        return secrets.token_urlsafe(nbytes)

    def uuid(self) -> str:
        return str(uuid.uuid4())

    def uniform(self, low: float, high: float) -> float:
        return self._rng.uniform(low, high)

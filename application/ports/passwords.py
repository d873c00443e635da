"""Port for password hashing (dashboard users). Hashing is slow on purpose, so the methods are async: an
implementation runs the work off the event loop."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class PasswordHasher(Protocol):
    async def hash(self, password: str) -> str:
        """A self-describing hash of ``password`` (scheme, parameters and salt included), fit to store."""
        ...

    async def verify(self, password: str, stored: str) -> bool:
        """Whether ``password`` matches ``stored``; False (never an error) for a wrong password or a hash that
        cannot be read."""
        ...

    def needs_rehash(self, stored: str) -> bool:
        """Whether ``stored`` uses an older scheme or weaker parameters than ``hash`` would today: after a
        successful ``verify`` the caller stores a fresh ``hash`` in its place."""
        ...


class OneTimePasswords(Protocol):
    """Time-based one-time passwords (RFC 6238) of authenticator apps: two-factor sign-in."""

    def new_secret(self) -> str:
        """A new random base32 secret."""
        ...

    def uri(self, secret: str, account: str, issuer: str) -> str:
        """The ``otpauth://totp/...`` URI an authenticator app enrols from."""
        ...

    def verify(self, secret: str, code: str, at: datetime) -> bool:
        """Whether ``code`` is the secret's code at ``at`` (or the step before or after)."""
        ...

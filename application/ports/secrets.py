"""Port for keeping secrets encrypted at rest (webhook signing secrets, provider credentials)."""

from __future__ import annotations

from typing import Protocol


class SecretUnreadable(Exception):
    """A sealed value could not be opened: it was sealed under another key, or was altered."""


class SecretBox(Protocol):
    """Authenticated symmetric encryption of short texts under the service's secret key."""

    def seal(self, plaintext: str) -> str:
        """An opaque, URL-safe text that only this box (same key) can open."""
        ...

    def open(self, sealed: str) -> str:
        """The plaintext of ``seal``; raises :class:`SecretUnreadable` when it cannot."""
        ...

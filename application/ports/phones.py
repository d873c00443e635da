"""Port for phone number normalisation (E.164)."""

from __future__ import annotations

from typing import Protocol


class PhoneNormalizer(Protocol):
    def normalize(self, raw: str, region: str | None = None) -> str | None:
        """The E.164 form of ``raw``, or None when it is not a possible phone number. Without ``region`` the
        number must carry its country code (+...)."""
        ...

"""Port for widget tokens: signed, self-contained credentials of the embeddable widget."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from domain.widget import WidgetGrant


class WidgetTokenInvalid(Exception):
    """A token that is malformed, signed with another key or algorithm, meant for another audience, expired,
    or missing a claim."""


class WidgetTokens(Protocol):
    def issue(self, grant: WidgetGrant) -> str:
        """A signed token carrying ``grant`` (it expires at ``grant.expires_at``)."""
        ...

    def verify(self, token: str, now: datetime) -> WidgetGrant:
        """The grant ``token`` carries, checked at ``now`` (the Clock's time, never the wall clock's); raises
        WidgetTokenInvalid."""
        ...

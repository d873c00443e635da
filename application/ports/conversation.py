"""Ports of the conversation runtime beyond the media session and the engines."""

from __future__ import annotations

from typing import Protocol


class ToolSecrets(Protocol):
    """The secret a custom tool's requests are signed with when the tool has none of its own: one per
    organization, derived from the service's secret key (stable across restarts, never stored)."""

    def for_organization(self, organization_id: int) -> str: ...

"""Port for usage accounting: features record what is billable; the usage feature reports it."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

CALL_SECONDS = "call_seconds"


class UsageRecorder(Protocol):
    async def record(self, organization_id: int, kind: str, quantity: float, at: datetime, reference: str) -> None:
        """Record ``quantity`` of ``kind`` (e.g. ``call_seconds``) once per (organization, kind, reference):
        recording the same reference again changes nothing."""
        ...

    async def total(self, organization_id: int, kind: str, start: datetime, end: datetime) -> float:
        """The sum of ``kind`` recorded at instants in [start, end)."""
        ...

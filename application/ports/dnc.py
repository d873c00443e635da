"""Ports for Do-Not-Call lists and for screening numbers in every dial path."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.dnc import DncEntry, DncList


class DncRepository(Protocol):
    async def add_list(self, dnc_list: DncList) -> DncList: ...

    async def get_list(self, organization_id: int, list_id: int) -> DncList | None:
        """With its entry_count."""
        ...

    async def lists(self, organization_id: int, page: PageRequest) -> Page[DncList]: ...

    async def delete_list(self, organization_id: int, list_id: int) -> None:
        """The list and all its entries."""
        ...

    async def add_entries(self, organization_id: int, list_id: int, numbers: list[tuple[str, str | None]],
                          at: datetime) -> int:
        """Add (E.164 number, reason) pairs; numbers already on the list are kept as they are.
        Returns how many were new."""
        ...

    async def entries(self, organization_id: int, list_id: int, page: PageRequest) -> Page[DncEntry]: ...

    async def remove_entry(self, organization_id: int, list_id: int, phone_number: str) -> bool: ...

    async def touch_list(self, organization_id: int, list_id: int, at: datetime) -> None:
        """Set the list's updated_at (its entries changed)."""
        ...


class DncScreener(Protocol):
    """The single screening call of every dial path (calls, campaigns, leads, SMS)."""

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        """For each E.164 number on any of the organization's lists, the ids of those lists. Numbers on no
        list are absent. Raises when the answer cannot be given (callers fail closed)."""
        ...

    async def opt_out_list_ids(self, organization_id: int) -> list[int]:
        """The organization's SMS opt-out lists (every list named ``domain.sms.OPT_OUT_LIST_NAME``), so a block
        can say it came from a STOP reply."""
        ...

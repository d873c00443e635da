"""In-memory Do-Not-Call lists, entries and screening."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.platform import Page, PageRequest
from domain.dnc import DncEntry, DncList
from domain.identity import persisted
from domain.sms import OPT_OUT_LIST_NAME


class InMemoryDncRepository:
    """``dnc_lists``: id -> DncList; ``dnc_entries``: (organization, number) -> {list id: DncEntry}."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add_list(self, dnc_list: DncList) -> DncList:
        tables = await self.uow.tables()
        stored = replace(dnc_list, id=self.uow.store.next_id("dnc_lists"), entry_count=0)
        tables["dnc_lists"][stored.id] = stored
        return stored

    async def _count(self, organization_id: int, list_id: int) -> int:
        entries = (await self.uow.tables())["dnc_entries"]
        return sum(1 for (org, _), by_list in entries.items() if org == organization_id and list_id in by_list)

    async def get_list(self, organization_id: int, list_id: int) -> DncList | None:
        found = (await self.uow.tables())["dnc_lists"].get(list_id)
        if found is None or found.organization_id != organization_id:
            return None
        return replace(found, entry_count=await self._count(organization_id, list_id))

    async def lists(self, organization_id: int, page: PageRequest) -> Page[DncList]:
        mine = sorted((x for x in (await self.uow.tables())["dnc_lists"].values()
                       if x.organization_id == organization_id), key=lambda x: x.id)
        listed = page.slice(mine)
        return replace(listed, items=[replace(x, entry_count=await self._count(organization_id, persisted(x.id)))
                                      for x in listed.items])

    async def delete_list(self, organization_id: int, list_id: int) -> None:
        tables = await self.uow.tables()
        for key, by_list in list(tables["dnc_entries"].items()):
            if key[0] == organization_id:
                by_list.pop(list_id, None)
                if not by_list:
                    del tables["dnc_entries"][key]
        found = tables["dnc_lists"].get(list_id)
        if found is not None and found.organization_id == organization_id:
            del tables["dnc_lists"][list_id]

    async def add_entries(self, organization_id: int, list_id: int, numbers: list[tuple[str, str | None]],
                          at: datetime) -> int:
        entries = (await self.uow.tables())["dnc_entries"]
        added = 0
        for number, reason in numbers:
            by_list = entries.setdefault((organization_id, number), {})
            if list_id not in by_list:
                by_list[list_id] = DncEntry(list_id, number, reason, at)
                added += 1
        return added

    async def entries(self, organization_id: int, list_id: int, page: PageRequest) -> Page[DncEntry]:
        entries = (await self.uow.tables())["dnc_entries"]
        found = sorted((by_list[list_id] for (org, _), by_list in entries.items()
                        if org == organization_id and list_id in by_list), key=lambda e: e.phone_number)
        return page.slice(found)

    async def remove_entry(self, organization_id: int, list_id: int, phone_number: str) -> bool:
        entries = (await self.uow.tables())["dnc_entries"]
        by_list = entries.get((organization_id, phone_number))
        if not by_list or list_id not in by_list:
            return False
        del by_list[list_id]
        if not by_list:
            del entries[(organization_id, phone_number)]
        return True

    async def touch_list(self, organization_id: int, list_id: int, at: datetime) -> None:
        lists = (await self.uow.tables())["dnc_lists"]
        found = lists.get(list_id)
        if found is not None and found.organization_id == organization_id:
            lists[list_id] = replace(found, updated_at=at)


class InMemoryDncScreener:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def screen(self, organization_id: int, numbers: list[str]) -> dict[str, list[int]]:
        entries = (await self.uow.tables())["dnc_entries"]
        found: dict[str, list[int]] = {}
        for number in dict.fromkeys(numbers):
            by_list = entries.get((organization_id, number))
            if by_list:
                found[number] = sorted(by_list)
        return found

    async def opt_out_list_ids(self, organization_id: int) -> list[int]:
        return sorted(x.id for x in (await self.uow.tables())["dnc_lists"].values()
                      if x.organization_id == organization_id and x.name == OPT_OUT_LIST_NAME)

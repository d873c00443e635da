"""In-memory SMS messages."""

from __future__ import annotations

import builtins
import copy
from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.platform import Page, PageRequest
from application.ports.sms import MessageRef, SmsFilter
from domain.dnc import DncList
from domain.identity import persisted
from domain.sms import SmsMessage


class InMemorySmsRepository:
    """``sms_messages``: id -> SmsMessage (``dnc_lists`` is the DNC adapter's table)."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, message: SmsMessage) -> SmsMessage:
        stored = replace(message, id=self.uow.store.next_id("sms_messages"),
                         carrier_state=copy.deepcopy(message.carrier_state))
        (await self.uow.tables())["sms_messages"][stored.id] = stored
        return stored

    async def get(self, organization_id: int, message_id: int, *, for_update: bool = False) -> SmsMessage | None:
        found = (await self.uow.tables())["sms_messages"].get(message_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def find_by_carrier_id(self, carrier_id: str) -> SmsMessage | None:
        return next((m for m in (await self.uow.tables())["sms_messages"].values() if m.carrier_id == carrier_id),
                    None)

    async def list(self, organization_id: int, filters: SmsFilter, page: PageRequest) -> Page[SmsMessage]:
        mine = [
            m for m in (await self.uow.tables())["sms_messages"].values()
            if m.organization_id == organization_id and filters.to in (None, m.to_phone)
            and filters.status in (None, m.status) and filters.direction in (None, m.direction)
            and (filters.created_after is None or m.created_at >= filters.created_after)
            and (filters.created_before is None or m.created_at < filters.created_before)
        ]
        mine.sort(key=lambda m: (m.created_at, persisted(m.id)), reverse=True)
        return page.slice(mine)

    async def update(self, message: SmsMessage) -> SmsMessage:
        table = (await self.uow.tables())["sms_messages"]
        current = table.get(message.id)
        if current is not None and current.organization_id == message.organization_id:
            table[message.id] = replace(message, carrier_state=copy.deepcopy(message.carrier_state))
        return message

    async def due(self, now: datetime, limit: int) -> builtins.list[MessageRef]:
        due = sorted((m for m in (await self.uow.tables())["sms_messages"].values()
                      if m.next_check_at is not None and m.next_check_at <= now),
                     key=lambda m: (m.next_check_at, persisted(m.id)))
        return [MessageRef(m.organization_id, persisted(m.id)) for m in due[:limit]]

    async def next_due(self) -> datetime | None:
        return min((m.next_check_at for m in (await self.uow.tables())["sms_messages"].values()
                    if m.next_check_at is not None), default=None)

    async def ensure_opt_out_list(self, organization_id: int, name: str, description: str, at: datetime) -> int:
        tables = await self.uow.tables()
        kept = tables["sms_opt_out_lists"]  # organization -> its opt-out list's id (SQL: dnc_lists.purpose)
        if kept.get(organization_id) not in tables["dnc_lists"]:
            made = DncList(self.uow.store.next_id("dnc_lists"), organization_id, name, description, at, at, 0)
            tables["dnc_lists"][made.id] = made
            kept[organization_id] = made.id
        return int(kept[organization_id])

    async def last_texted_by(self, sender: str, recipient: str) -> int | None:
        sent = [m for m in (await self.uow.tables())["sms_messages"].values()
                if m.direction == "outbound" and m.from_phone == sender and m.to_phone == recipient]
        return max(sent, key=lambda m: (m.created_at, m.id)).organization_id if sent else None

    async def opt_out_list_ids(self, organization_id: int, name: str) -> builtins.list[int]:
        return sorted(x.id for x in (await self.uow.tables())["dnc_lists"].values()
                      if x.organization_id == organization_id and x.name == name)

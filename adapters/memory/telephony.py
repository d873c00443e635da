"""In-memory telephony providers and phone numbers."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from domain.telephony import DEFAULT_PROVIDER_NAME, PhoneNumber, TelephonyProvider, number_taken


class InMemoryTelephonyProviderRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _mine(self, organization_id: int) -> list[TelephonyProvider]:
        table = (await self.uow.tables())["telephony_providers"]
        return sorted((p for p in table.values() if p.organization_id == organization_id), key=lambda p: p.id)

    async def ensure_default(self, organization_id: int, now: datetime) -> TelephonyProvider:
        mine = await self._mine(organization_id)
        for provider in mine:
            if provider.builtin:
                return provider
        return await self.add(TelephonyProvider(None, organization_id, DEFAULT_PROVIDER_NAME, "simulator", "active",
                                                not any(p.is_default for p in mine), True, None, (), {}, now, now))

    async def add(self, provider: TelephonyProvider) -> TelephonyProvider:
        tables = await self.uow.tables()
        stored = replace(provider, id=self.uow.store.next_id("telephony_providers"),
                         settings=copy.deepcopy(provider.settings))
        tables["telephony_providers"][stored.id] = stored
        return stored

    async def get(self, organization_id: int, provider_id: int) -> TelephonyProvider | None:
        found = (await self.uow.tables())["telephony_providers"].get(provider_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def find(self, provider_id: int) -> TelephonyProvider | None:
        return (await self.uow.tables())["telephony_providers"].get(provider_id)

    async def list(self, organization_id: int) -> list[TelephonyProvider]:
        return await self._mine(organization_id)

    async def update(self, provider: TelephonyProvider) -> TelephonyProvider:
        table = (await self.uow.tables())["telephony_providers"]
        current = table.get(provider.id)
        if current is not None and current.organization_id == provider.organization_id:
            table[provider.id] = replace(provider, builtin=current.builtin, created_at=current.created_at)
        return provider

    async def clear_default(self, organization_id: int, except_id: int) -> None:
        table = (await self.uow.tables())["telephony_providers"]
        for pid, provider in list(table.items()):
            if provider.organization_id == organization_id and pid != except_id and provider.is_default:
                table[pid] = replace(provider, is_default=False)

    async def default(self, organization_id: int) -> TelephonyProvider | None:
        return next((p for p in await self._mine(organization_id) if p.is_default), None)

    async def delete(self, organization_id: int, provider_id: int) -> None:
        table = (await self.uow.tables())["telephony_providers"]
        found = table.get(provider_id)
        if found is not None and found.organization_id == organization_id:
            del table[provider_id]


class InMemoryPhoneNumberRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _mine(self, organization_id: int) -> list[PhoneNumber]:
        table = (await self.uow.tables())["telephony_numbers"]
        return sorted((n for n in table.values() if n.organization_id == organization_id), key=lambda n: n.id)

    async def add(self, number: PhoneNumber) -> PhoneNumber:
        table = (await self.uow.tables())["telephony_numbers"]
        holder = next((n for n in table.values() if n.phone_number == number.phone_number), None)
        if holder is not None:
            raise number_taken(number.phone_number, mine=holder.organization_id == number.organization_id)
        stored = replace(number, id=self.uow.store.next_id("telephony_numbers"))
        (await self.uow.tables())["telephony_numbers"][stored.id] = stored
        return stored

    async def get(self, organization_id: int, number_id: int) -> PhoneNumber | None:
        found = (await self.uow.tables())["telephony_numbers"].get(number_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def list(self, organization_id: int, provider_id: int | None = None) -> list[PhoneNumber]:
        return [n for n in await self._mine(organization_id) if provider_id is None or n.provider_id == provider_id]

    async def update(self, number: PhoneNumber) -> PhoneNumber:
        table = (await self.uow.tables())["telephony_numbers"]
        current = table.get(number.id)
        if current is not None and current.organization_id == number.organization_id:
            table[number.id] = replace(number, phone_number=current.phone_number, created_at=current.created_at)
        return number

    async def delete(self, organization_id: int, number_id: int) -> None:
        table = (await self.uow.tables())["telephony_numbers"]
        found = table.get(number_id)
        if found is not None and found.organization_id == organization_id:
            del table[number_id]

    async def count_for_provider(self, organization_id: int, provider_id: int) -> int:
        return len(await self.list(organization_id, provider_id))

    async def outbound_for_agent(self, organization_id: int, agent_id: int) -> PhoneNumber | None:
        voice = [n for n in await self._mine(organization_id) if n.voice and n.status == "active"]
        voice.sort(key=lambda n: (n.inbound_agent_id != agent_id, n.id))
        return voice[0] if voice else None

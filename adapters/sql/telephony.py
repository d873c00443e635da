"""SQL telephony providers and phone numbers."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.calls_tables import telephony_numbers, telephony_providers
from adapters.sql.dialect import insert
from adapters.sql.uow import SqlUnitOfWork
from domain.telephony import (
    BUILTIN_SIMULATOR,
    DEFAULT_PROVIDER_NAME,
    PhoneNumber,
    PhoneNumberStatus,
    TelephonyProvider,
    number_taken,
)

tp = telephony_providers
tn = telephony_numbers

# the lookups of every call placed, built once with bound parameters
_BUILTIN_PROVIDER = sa.select(tp).where(tp.c.organization_id == sa.bindparam("org"),
                                        tp.c.builtin_key == BUILTIN_SIMULATOR)
_DEFAULT_PROVIDER = sa.select(tp).where(tp.c.organization_id == sa.bindparam("org"),
                                        tp.c.is_default.is_(True)).order_by(tp.c.id).limit(1)
# the default and the built-in simulator at once, the default first (the lowest id among defaults, as _DEFAULT_PROVIDER)
PROVIDER_FOR_CALL = sa.select(tp).where(tp.c.organization_id == sa.bindparam("org"), sa.or_(
    tp.c.builtin_key == BUILTIN_SIMULATOR, tp.c.is_default.is_(True))).order_by(tp.c.is_default.desc(), tp.c.id)
OUTBOUND_NUMBER = (
    sa.select(tn).where(tn.c.organization_id == sa.bindparam("org"), tn.c.voice.is_(True),
                        tn.c.status == PhoneNumberStatus.ACTIVE)
    .order_by(sa.case((tn.c.inbound_agent_id == sa.bindparam("agent_id"), 0), else_=1), tn.c.id).limit(1)
)
_FIND = sa.select(tp).where(tp.c.id == sa.bindparam("provider_id"))  # every carrier webhook's first read


def row_to_provider(row: Any) -> TelephonyProvider:
    return TelephonyProvider(
        id=row.id, organization_id=row.organization_id, name=row.name, type=row.type, status=row.status,
        is_default=bool(row.is_default), builtin=row.builtin_key is not None,
        credentials_sealed=row.credentials_sealed, credential_fields=tuple(row.credential_fields or ()),
        settings=dict(row.settings or {}), created_at=row.created_at, updated_at=row.updated_at,
    )


def _provider_values(p: TelephonyProvider) -> dict[str, Any]:
    return {
        "organization_id": p.organization_id, "name": p.name, "type": p.type, "status": p.status,
        "is_default": p.is_default, "builtin_key": BUILTIN_SIMULATOR if p.builtin else None,
        "credentials_sealed": p.credentials_sealed, "credential_fields": list(p.credential_fields),
        "settings": p.settings, "created_at": p.created_at, "updated_at": p.updated_at,
    }


_PROVIDER = sa.select(tp).where(tp.c.organization_id == sa.bindparam("org"), tp.c.id == sa.bindparam("id"))
"""A provider by id, built once (every carrier dial reads its provider)."""


class SqlTelephonyProviderRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def ensure_default(self, organization_id: int, now: datetime) -> TelephonyProvider:
        conn = await self.uow.connection()
        row = (await conn.execute(_BUILTIN_PROVIDER, {"org": organization_id})).first()
        if row is not None:
            return row_to_provider(row)
        has_default = (await conn.execute(sa.select(sa.func.count()).select_from(tp).where(
            tp.c.organization_id == organization_id, tp.c.is_default.is_(True)))).scalar_one()
        builtin = TelephonyProvider(None, organization_id, DEFAULT_PROVIDER_NAME, "simulator", "active",
                                    not has_default, True, None, (), {}, now, now)
        await conn.execute(insert(tp, self.uow.dialect).values(**_provider_values(builtin))
                           .on_conflict_do_nothing(index_elements=["organization_id", "builtin_key"]))
        row = (await conn.execute(sa.select(tp).where(tp.c.organization_id == organization_id,
                                                      tp.c.builtin_key == BUILTIN_SIMULATOR))).one()
        return row_to_provider(row)

    async def add(self, provider: TelephonyProvider) -> TelephonyProvider:
        conn = await self.uow.connection()
        new_id = (await conn.execute(tp.insert().returning(tp.c.id), _provider_values(provider))).scalar_one()
        return replace(provider, id=new_id)

    async def get(self, organization_id: int, provider_id: int) -> TelephonyProvider | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_PROVIDER, {"org": organization_id, "id": provider_id})).first()
        return row_to_provider(row) if row else None

    async def find(self, provider_id: int) -> TelephonyProvider | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_FIND, {"provider_id": provider_id})).first()
        return row_to_provider(row) if row else None

    async def list(self, organization_id: int) -> list[TelephonyProvider]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(tp).where(tp.c.organization_id == organization_id).order_by(tp.c.id))
        return [row_to_provider(r) for r in rows]

    async def update(self, provider: TelephonyProvider) -> TelephonyProvider:
        conn = await self.uow.connection()
        values = _provider_values(provider)
        for fixed in ("organization_id", "created_at", "builtin_key"):
            values.pop(fixed)
        await conn.execute(tp.update().where(tp.c.organization_id == provider.organization_id,
                                             tp.c.id == provider.id).values(**values))
        return provider

    async def clear_default(self, organization_id: int, except_id: int) -> None:
        conn = await self.uow.connection()
        await conn.execute(tp.update().where(tp.c.organization_id == organization_id, tp.c.id != except_id,
                                             tp.c.is_default.is_(True)).values(is_default=False))

    async def default(self, organization_id: int) -> TelephonyProvider | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_DEFAULT_PROVIDER, {"org": organization_id})).first()
        return row_to_provider(row) if row else None

    async def for_new_call(self, organization_id: int, now: datetime) -> TelephonyProvider:
        ahead: TelephonyProvider | None = self.uow.read_ahead.pop(("call_provider", organization_id), None)
        if ahead is not None:  # read ahead of the call (SqlCallPlacementReads), the built-in provider known to exist
            return ahead
        conn = await self.uow.connection()
        rows = (await conn.execute(PROVIDER_FOR_CALL, {"org": organization_id})).all()
        if not any(row.builtin_key is not None for row in rows):  # the organization's first call: create it
            builtin = await self.ensure_default(organization_id, now)
            return await self.default(organization_id) or builtin
        return row_to_provider(rows[0])  # a default when there is one (is_default sorts first), else the built-in

    async def delete(self, organization_id: int, provider_id: int) -> None:
        conn = await self.uow.connection()
        await conn.execute(tp.delete().where(tp.c.organization_id == organization_id, tp.c.id == provider_id))


def row_to_number(row: Any) -> PhoneNumber:
    return PhoneNumber(
        id=row.id, organization_id=row.organization_id, phone_number=row.phone_number, provider_id=row.provider_id,
        label=row.label, inbound_agent_id=row.inbound_agent_id, voice=bool(row.voice), sms=bool(row.sms),
        status=row.status, created_at=row.created_at, updated_at=row.updated_at,
    )


def _number_values(n: PhoneNumber) -> dict[str, Any]:
    return {
        "organization_id": n.organization_id, "phone_number": n.phone_number, "provider_id": n.provider_id,
        "label": n.label, "inbound_agent_id": n.inbound_agent_id, "voice": n.voice, "sms": n.sms,
        "status": n.status, "created_at": n.created_at, "updated_at": n.updated_at,
    }


class SqlPhoneNumberRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, number: PhoneNumber) -> PhoneNumber:
        conn = await self.uow.connection()
        new_id = (await conn.execute(
            insert(tn, self.uow.dialect).values(**_number_values(number))
            .on_conflict_do_nothing(index_elements=["phone_number"]).returning(tn.c.id)
        )).scalar_one_or_none()
        if new_id is None:  # uq_telephony_numbers_phone_number: someone holds it (committed, or waited for)
            owner = (await conn.execute(sa.select(tn.c.organization_id).where(
                tn.c.phone_number == number.phone_number))).scalar()
            raise number_taken(number.phone_number, mine=owner == number.organization_id)
        return replace(number, id=new_id)

    async def get(self, organization_id: int, number_id: int) -> PhoneNumber | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(tn).where(tn.c.organization_id == organization_id,
                                                      tn.c.id == number_id))).first()
        return row_to_number(row) if row else None

    async def list(self, organization_id: int, provider_id: int | None = None) -> list[PhoneNumber]:
        conn = await self.uow.connection()
        query = sa.select(tn).where(tn.c.organization_id == organization_id)
        if provider_id is not None:
            query = query.where(tn.c.provider_id == provider_id)
        return [row_to_number(r) for r in await conn.execute(query.order_by(tn.c.id))]

    async def update(self, number: PhoneNumber) -> PhoneNumber:
        conn = await self.uow.connection()
        values = _number_values(number)
        for fixed in ("organization_id", "created_at", "phone_number"):
            values.pop(fixed)
        await conn.execute(tn.update().where(tn.c.organization_id == number.organization_id,
                                             tn.c.id == number.id).values(**values))
        return number

    async def delete(self, organization_id: int, number_id: int) -> None:
        conn = await self.uow.connection()
        await conn.execute(tn.delete().where(tn.c.organization_id == organization_id, tn.c.id == number_id))

    async def count_for_provider(self, organization_id: int, provider_id: int) -> int:
        conn = await self.uow.connection()
        return (await conn.execute(sa.select(sa.func.count()).select_from(tn).where(
            tn.c.organization_id == organization_id, tn.c.provider_id == provider_id))).scalar_one()

    async def outbound_for_agent(self, organization_id: int, agent_id: int) -> PhoneNumber | None:
        ahead: tuple[PhoneNumber | None] | None = self.uow.read_ahead.pop(
            ("outbound_number", organization_id, agent_id), None)
        if ahead is not None:  # read ahead of the call (SqlCallPlacementReads): the answer, None included
            return ahead[0]
        conn = await self.uow.connection()
        row = (await conn.execute(OUTBOUND_NUMBER, {"org": organization_id, "agent_id": agent_id})).first()
        return row_to_number(row) if row else None

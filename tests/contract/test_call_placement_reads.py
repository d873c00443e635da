"""``CallPlacementReads``: what placing a call asks (the organization, its billing account, the provider of a new
call, the agent's caller number, the DNC screen of the destination), read ahead at once, is answered exactly as
each repository answers it alone; on SQL the questions then cost no statement, and each answer serves one
question only."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from application.ports.accounts import OrganizationRepository
from application.ports.billing import BillingAccount, BillingRepository
from application.ports.calls import CallPlacementReads
from application.ports.dnc import DncRepository, DncScreener
from application.ports.platform import UnitOfWork
from application.ports.telephony import PhoneNumberRepository, TelephonyProviderRepository
from domain.dnc import DncList
from domain.telephony import PhoneNumber
from tests.http.calls_support import unique_phone
from tests.support.apps import new_organization

NOW = datetime(2026, 3, 3, 9, tzinfo=UTC)
AGENT = 41
LISTED, FREE = "+14155550101", "+14155550102"


async def _answers(r: Any, org: int, destination: str) -> tuple[Any, ...]:
    return (await (await r.get(OrganizationRepository)).get(org),
            await (await r.get(BillingRepository)).account(org),
            await (await r.get(TelephonyProviderRepository)).for_new_call(org, NOW),
            await (await r.get(PhoneNumberRepository)).outbound_for_agent(org, AGENT),
            await (await r.get(DncScreener)).screen(org, [destination]))


async def _read(container: Any, org: int, destination: str, *, ahead: bool) -> tuple[tuple[Any, ...], int]:
    """The answers (with or without reading ahead) and the statements the questions sent after it."""
    statements = 0

    def seen(*_: Any) -> None:
        nonlocal statements
        statements += 1

    async with container() as r:
        uow = await r.get(UnitOfWork)
        if ahead:
            await (await r.get(CallPlacementReads)).read_ahead(org, AGENT, destination)
        try:
            engine = (await r.get(AsyncEngine)).sync_engine
        except Exception:  # the memory backend: no engine, nothing to count
            engine = None
        if engine is not None:
            sa.event.listen(engine, "before_cursor_execute", seen)
        try:
            answers = await _answers(r, org, destination)
        finally:
            if engine is not None:
                sa.event.remove(engine, "before_cursor_execute", seen)
        await uow.commit()
    return answers, statements if engine is not None else -1


async def test_answers_read_ahead_are_the_repositories_own(container: Any) -> None:
    org = await new_organization(container)
    # the organization's first call: the built-in provider does not exist yet, the repository makes it
    first, _ = await _read(container, org, FREE, ahead=True)
    assert first[2].builtin and first[1] == BillingAccount(org) and first[3] is None and first[4] == {}
    # numbers of their own: a number belongs to one organization in the whole database, which the run's tests share
    caller, other = unique_phone(), unique_phone()
    async with container() as r:
        provider = await (await r.get(TelephonyProviderRepository)).for_new_call(org, NOW)
        numbers = await r.get(PhoneNumberRepository)
        await numbers.add(PhoneNumber(None, org, caller, provider.id or 0, created_at=NOW, updated_at=NOW))
        mine = await numbers.add(PhoneNumber(None, org, other, provider.id or 0, inbound_agent_id=None,
                                             created_at=NOW, updated_at=NOW))
        dnc = await r.get(DncRepository)
        listed = await dnc.add_list(DncList(None, org, "Do not call", None, NOW, NOW))
        await dnc.add_entries(org, listed.id or 0, [(LISTED, None)], NOW)
        await (await r.get(BillingRepository)).save_account(BillingAccount(org, "past_due", past_due_since=NOW))
        await (await r.get(UnitOfWork)).commit()
    assert mine.id
    for destination in (FREE, LISTED):
        alone, _ = await _read(container, org, destination, ahead=False)
        ahead, statements = await _read(container, org, destination, ahead=True)
        assert ahead == alone
        assert alone[1].status == "past_due" and alone[3] is not None and alone[3].phone_number == caller
        assert (alone[4] == {}) is (destination == FREE)
        if statements >= 0:  # SQL: answered from what was read ahead (a listed number's lists are read apart)
            assert statements == (0 if destination == FREE else 1)


async def test_an_answer_read_ahead_serves_one_question(container: Any) -> None:
    org = await new_organization(container)
    await _read(container, org, FREE, ahead=False)  # the built-in provider exists from here on
    async with container() as r:
        await (await r.get(CallPlacementReads)).read_ahead(org, AGENT, FREE)
        billing = await r.get(BillingRepository)
        assert (await billing.account(org)).status == "active"
        await billing.save_account(BillingAccount(org, "canceled"))
        assert (await billing.account(org)).status == "canceled"  # asked again: read, not what was read ahead
        await (await r.get(UnitOfWork)).rollback()
    async with container() as r:
        await (await r.get(CallPlacementReads)).read_ahead(org, AGENT, FREE)
        await (await r.get(UnitOfWork)).rollback()  # the transaction ends: what was read ahead goes with it
        assert (await (await r.get(BillingRepository)).account(org)).status == "active"

"""The usage ledger port on every backend (memory, SQLite, PostgreSQL): append once per source, counters moved
only by a new row, conditional reservations, release once, threshold marks once; and a partner's children with
their usage of a period, read together."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from typing import Any

from application.accounts import CreateOrganization, CreateOrganizationCommand
from application.ports.accounts import OrganizationRepository
from application.ports.platform import UnitOfWork
from application.ports.usage import ChildrenUsage, ChildUsed, UsageLedger
from domain.usage import CALL_SECONDS, CALLS, SMS_SEGMENTS, LedgerEntry
from tests.support.apps import new_organization

NOW = datetime(2026, 2, 2, 12, tzinfo=UTC)


async def test_the_ledger_counts_each_source_once_and_reserves_conditionally(container: Any) -> None:
    org = await new_organization(container, plan="starter")
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    async with container() as r:
        ledger = await r.get(UsageLedger)
        entry = LedgerEntry(org, SMS_SEGMENTS, 3, "2026-02", "sms", a, NOW)
        assert await ledger.append(entry) == (0, 3)
        assert await ledger.append(entry) is None
        assert await ledger.append(LedgerEntry(org, SMS_SEGMENTS, 2, "2026-02", "sms", b, NOW)) == (3, 5)
        assert await ledger.reserve(org, "2026-02", CALL_SECONDS, "call", a, 600, 1000)
        assert await ledger.reserve(org, "2026-02", CALL_SECONDS, "call", a, 600, 1000)  # held already
        assert not await ledger.reserve(org, "2026-02", CALL_SECONDS, "call", b, 600, 1000)
        await ledger.release("call", a, CALL_SECONDS)
        await ledger.release("call", a, CALL_SECONDS)  # once
        assert await ledger.reserve(org, "2026-02", CALL_SECONDS, "call", b, 1000, 1000)
        assert await ledger.mark_threshold(org, "2026-02", SMS_SEGMENTS, 80)
        assert not await ledger.mark_threshold(org, "2026-02", SMS_SEGMENTS, 80)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        ledger = await r.get(UsageLedger)
        assert await ledger.used(org, "2026-02") == {SMS_SEGMENTS: 5, CALL_SECONDS: 0}
        assert await ledger.used(org, "2026-01") == {}
        assert await ledger.daily(org, SMS_SEGMENTS, date(2026, 2, 1), date(2026, 2, 3)) == {date(2026, 2, 2): 5}
        assert await ledger.daily(org, SMS_SEGMENTS, date(2026, 2, 3), date(2026, 2, 4)) == {}


async def test_the_ledger_breaks_usage_down_by_agent_campaign_and_organization(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    late = NOW.replace(hour=14, minute=30)
    async with container() as r:
        ledger = await r.get(UsageLedger)
        for owner, quantity, at, agent, campaign in ((org, 60, NOW, 1, 7), (org, 30, late, 1, None),
                                                     (org, 90, late, 2, 7), (other, 120, NOW, 3, None)):
            await ledger.append(LedgerEntry(owner, CALL_SECONDS, quantity, "2026-02", "call", str(uuid.uuid4()),
                                            at, agent, campaign))
        await ledger.append(LedgerEntry(org, SMS_SEGMENTS, 2, "2026-02", "sms", str(uuid.uuid4()), NOW))
        await (await r.get(UnitOfWork)).commit()
    start, end = NOW.replace(hour=0), NOW.replace(hour=23)
    noon, two = NOW, late.replace(minute=0)
    async with container() as r:
        ledger = await r.get(UsageLedger)
        assert await ledger.breakdown([org], CALL_SECONDS, start, end, "agent") == {
            (1, noon): 60, (1, two): 30, (2, two): 90}
        assert await ledger.breakdown([org], CALL_SECONDS, start, end, "campaign") == {
            (7, noon): 60, (None, two): 30, (7, two): 90}
        assert await ledger.breakdown([org, other], CALL_SECONDS, start, end, "organization") == {
            (org, noon): 60, (org, two): 120, (other, noon): 120}
        assert await ledger.breakdown([org], SMS_SEGMENTS, start, end, "agent") == {(None, noon): 2}
        assert await ledger.breakdown([org], CALL_SECONDS, start, noon, "agent") == {}
        assert await ledger.breakdown([], CALL_SECONDS, start, end, "agent") == {}


async def test_a_partners_children_come_with_their_usage_of_the_period(container: Any) -> None:
    partner = await new_organization(container, org_type="partner")
    other = await new_organization(container, org_type="partner")
    async with container() as r:
        create = await r.get(CreateOrganization)
        a, b, gone, elsewhere = [
            (await create.execute(CreateOrganizationCommand(name, "business", parent_id=parent))).id or 0
            for name, parent in (("Acme Dental", partner), ("Plumbing Co", partner), ("Gone", partner),
                                 ("Elsewhere", other))]
        ledger = await r.get(UsageLedger)
        for org, metric, quantity, period in ((a, CALL_SECONDS, 90, "2026-02"), (a, CALLS, 1, "2026-02"),
                                              (a, CALL_SECONDS, 30, "2026-02"), (a, CALL_SECONDS, 600, "2026-01"),
                                              (b, SMS_SEGMENTS, 4, "2026-01"), (elsewhere, CALLS, 9, "2026-02"),
                                              (gone, CALLS, 5, "2026-02")):
            await ledger.append(LedgerEntry(org, metric, quantity, period, "call", str(uuid.uuid4()), NOW))
        await (await r.get(OrganizationRepository)).delete(gone, NOW)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        children = await r.get(ChildrenUsage)
        assert await children.of_children(partner, "2026-02") == [
            ChildUsed(a, "Acme Dental", "business", {CALL_SECONDS: 120, CALLS: 1}),
            ChildUsed(b, "Plumbing Co", "business", {})]
        assert await children.of_children(partner, "2026-01") == [
            ChildUsed(a, "Acme Dental", "business", {CALL_SECONDS: 600}),
            ChildUsed(b, "Plumbing Co", "business", {SMS_SEGMENTS: 4})]
        assert await children.of_children(a, "2026-02") == []  # a child has no children

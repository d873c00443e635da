"""Leads behave the same on memory, SQLite and PostgreSQL: storage, the external-id key, the list's filters and
the outcome consumer reading the outbox behind its own cursor."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from application.leads import FollowLeadOutcomes, FollowLeadOutcomesCommand
from application.outbox import LEADS
from application.ports.events import OutboxReader
from application.ports.leads import LeadFilter, LeadRepository
from application.ports.platform import PageRequest, UnitOfWork
from domain.events import EventType
from domain.leads import Lead
from tests.support.apps import new_organization

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


def _lead(org: int, n: int, **fields: Any) -> Lead:
    values: dict[str, Any] = {"agent_id": 7, "created_at": NOW + timedelta(minutes=n),
                              "updated_at": NOW + timedelta(minutes=n), **fields}
    return Lead(None, org, f"+1415555{n:04d}", f"Lead {n}", custom_data={"n": n}, **values)


async def _add(container: Any, *leads: Lead) -> list[Lead | None]:
    async with container() as r:
        repo = await r.get(LeadRepository)
        stored = [await repo.add(lead) for lead in leads]
        await (await r.get(UnitOfWork)).commit()
    return stored


async def test_leads_round_trip_and_external_ids_are_unique_per_organization(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    first, plain, twin_plain = await _add(container, _lead(org, 1, external_id="crm-1", source="web",
                                                           email="a@example.com"),
                                          _lead(org, 2), _lead(org, 3))
    assert first is not None and plain is not None and twin_plain is not None  # no external id: never a duplicate
    (again,) = await _add(container, _lead(org, 4, external_id="crm-1"))
    assert again is None
    (theirs,) = await _add(container, _lead(other, 5, external_id="crm-1"))
    assert theirs is not None and theirs.id != first.id
    async with container() as r:
        repo = await r.get(LeadRepository)
        assert await repo.get(org, first.id or 0) == first
        assert first.custom_data == {"n": 1} and first.email == "a@example.com" and first.source == "web"
        assert await repo.get(other, first.id or 0) is None
        assert await repo.find_external(org, "crm-1") == first
        assert await repo.find_external(other, "crm-1") == theirs
        assert await repo.find_external(org, "crm-2") is None
        moved = replace(first, status="called", call_id="call-9", contact_id=None, updated_at=NOW + timedelta(hours=1))
        await repo.update(moved)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        assert await (await r.get(LeadRepository)).get(org, first.id or 0) == moved


async def test_leads_are_listed_newest_first_by_status_source_and_creation_time(container: Any) -> None:
    org = await new_organization(container)
    stored = await _add(container, *(_lead(org, n, source="web" if n % 2 else "zap",
                                           status="queued" if n < 3 else "blocked_dnc") for n in range(5)))
    ids = [lead.id for lead in stored if lead is not None]
    async with container() as r:
        repo = await r.get(LeadRepository)

        async def listed(page: PageRequest = PageRequest(), **filters: Any) -> tuple[list[int | None], int]:
            found = await repo.list(org, LeadFilter(**filters), page)
            return [x.id for x in found.items], found.total

        assert await listed() == (ids[::-1], 5)
        assert await listed(PageRequest(2, 1)) == ([ids[3], ids[2]], 5)
        assert await listed(source="web") == ([ids[3], ids[1]], 2)
        assert await listed(status="blocked_dnc") == ([ids[4], ids[3]], 2)
        assert await listed(status="queued", source="zap") == ([ids[2], ids[0]], 2)
        assert await listed(created_after=NOW + timedelta(minutes=1), created_before=NOW + timedelta(minutes=3)) == (
            [ids[2], ids[1]], 2)
        assert await listed(status="failed") == ([], 0)


async def test_the_consumer_moves_queued_leads_as_their_calls_and_contacts_end(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    reached, busy, done, in_campaign, twin, other_contact, blocked = await _add(
        container,
        _lead(org, 1, call_id="call-1"),
        _lead(org, 2, call_id="call-2"),
        _lead(org, 3, call_id="call-3", status="called"),
        _lead(org, 4, agent_id=None, campaign_id=5, contact_id=41),
        _lead(org, 5, agent_id=None, campaign_id=5, contact_id=41),
        _lead(org, 6, agent_id=None, campaign_id=5, contact_id=42),
        _lead(org, 7, status="blocked_dnc", reason="dnc_blocked"),
    )
    call = {"end_reason": None, "direction": "outbound"}
    async with container() as r:
        uow = await r.get(UnitOfWork)
        for event in (
            EventType.CALL_ENDED(org, {**call, "id": "call-1", "status": "completed", "end_reason": "hangup"}),
            EventType.CALL_ENDED(org, {**call, "id": "call-2", "status": "busy", "end_reason": "busy"}),
            EventType.CALL_ENDED(org, {**call, "id": "call-3", "status": "failed", "end_reason": "carrier_error"}),
            EventType.CALL_ENDED(other, {**call, "id": "call-1", "status": "busy"}),  # another organization
            EventType.CALL_STARTED(org, {**call, "id": "call-2", "status": "ringing"}),  # not an end
            EventType.CONTACT_COMPLETED(org, {"campaign_id": 5, "contact_id": 41, "last_call_id": "call-41",
                                              "reason": None}),
            EventType.CONTACT_FAILED(org, {"campaign_id": 5, "contact_id": 42, "last_call_id": None,
                                           "reason": "no_answer"}),
        ):
            uow.record(event)
        await uow.commit()
    async with container() as r:
        assert await (await r.get(FollowLeadOutcomes)).execute(FollowLeadOutcomesCommand(limit=3)) == 3
        await (await r.get(UnitOfWork)).commit()
    while True:  # the rest (with whatever other tests left in a shared database), batch by batch
        async with container() as r:
            read = await (await r.get(FollowLeadOutcomes)).execute(FollowLeadOutcomesCommand())
            await (await r.get(UnitOfWork)).commit()
        if not read:
            break
    async with container() as r:
        assert await (await r.get(FollowLeadOutcomes)).execute(FollowLeadOutcomesCommand()) == 0  # read once
        repo, outbox = await r.get(LeadRepository), await r.get(OutboxReader)
        assert await outbox.cursor(LEADS) > 0

        async def state(lead: Lead | None) -> tuple[str, str | None, str | None]:
            found = await repo.get(org, lead.id or 0) if lead else None
            assert found is not None
            return found.status, found.reason, found.call_id

        assert await state(reached) == ("called", None, "call-1")
        assert await state(busy) == ("failed", "busy", "call-2")
        assert await state(done) == ("called", None, "call-3")  # a final lead stays as it is
        assert await state(in_campaign) == await state(twin) == ("called", None, "call-41")
        assert await state(other_contact) == ("failed", "no_answer", None)
        assert await state(blocked) == ("blocked_dnc", "dnc_blocked", None)


async def test_the_leads_queued_on_ended_contacts_fail_with_the_reason(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    on_41, twin, on_42, final, other_campaign, other_org = await _add(
        container,
        _lead(org, 1, agent_id=None, campaign_id=5, contact_id=41),
        _lead(org, 2, agent_id=None, campaign_id=5, contact_id=41),
        _lead(org, 3, agent_id=None, campaign_id=5, contact_id=42),
        _lead(org, 4, agent_id=None, campaign_id=5, contact_id=43, status="called"),
        _lead(org, 5, agent_id=None, campaign_id=6, contact_id=41),
        _lead(other, 6, agent_id=None, campaign_id=5, contact_id=41),
    )
    later = NOW + timedelta(hours=1)
    async with container() as r:
        repo = await r.get(LeadRepository)
        assert await repo.queued_for_campaign(org, 5) == [(on_41.id, 41), (twin.id, 41), (on_42.id, 42)]  # type: ignore[union-attr]
        ids = [lead.id or 0 for lead in (on_41, twin, final, other_org) if lead]
        assert await repo.fail_queued(org, ids, "campaign_cancelled", later) == 2  # final and other_org stay
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(LeadRepository)

        async def state(lead: Lead | None, organization: int = org) -> tuple[str, str | None]:
            found = await repo.get(organization, lead.id or 0) if lead else None
            assert found is not None
            return found.status, found.reason

        assert await state(on_41) == await state(twin) == ("failed", "campaign_cancelled")
        assert (await repo.get(org, on_41.id or 0)).updated_at == later  # type: ignore[union-attr]
        assert await state(on_42) == ("queued", None)
        assert await state(final) == ("called", None)
        assert await state(other_campaign) == ("queued", None)
        assert await state(other_org, other) == ("queued", None)
        assert await repo.queued_for_campaign(org, 5) == [(on_42.id, 42)]  # type: ignore[union-attr]

"""Campaigns, contacts and attempts behave the same on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from application.ports.agents import AgentRepository
from application.ports.campaigns import CampaignFilter, CampaignRepository, ContactFilter, ContactRepository
from application.ports.dialer import DialerStore
from application.ports.platform import PageRequest, UnitOfWork
from domain.agents import Agent
from domain.campaigns import CallingHours, Campaign, CampaignStats, Contact, ContactAttempt, RetryPolicy, RetryRule
from domain.errors import Conflict
from tests.support.apps import new_organization

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


async def _campaign(container: Any, org: int, **fields: Any) -> Campaign:
    async with container() as r:
        agent = await (await r.get(AgentRepository)).add(Agent(None, org, "Desk", created_at=NOW, updated_at=NOW))
        campaign = await (await r.get(CampaignRepository)).add(Campaign(
            None, org, "Spring", agent.id or 0, created_at=NOW, updated_at=NOW, **fields))
        await (await r.get(UnitOfWork)).commit()
    return campaign


def _contact(org: int, campaign_id: int, n: int, **fields: Any) -> Contact:
    return Contact(None, org, campaign_id, f"+1415555{n:04d}", f"Contact {n}", custom_data={"n": n},
                   created_at=NOW, updated_at=NOW, **fields)


async def test_campaigns_round_trip_filter_and_stay_in_their_organization(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    retry = RetryPolicy(busy=RetryRule(5, 15))
    first = await _campaign(container, org, schedule_id=77, timezone="Europe/Berlin", timezone_mode="campaign",
                            calling_hours=CallingHours("09:00", "24:00"), max_concurrent_calls=12, retry=retry,
                            from_phone_number_id=4, allowed_countries=("US",), widget_max_contacts_per_hour=7)
    second = await _campaign(container, org)
    await _campaign(container, other)
    async with container() as r:
        campaigns = await r.get(CampaignRepository)
        got = await campaigns.get(org, first.id or 0)
        assert got == first and got.retry.busy == RetryRule(5, 15) and got.calling_hours.end == "24:00"
        assert (got.allowed_countries, got.widget_max_contacts_per_hour) == (("US",), 7)
        assert await campaigns.get(org, second.id or 0) == second and second.allowed_countries is None
        assert await campaigns.get(other, first.id or 0) is None
        page = await campaigns.list(org, CampaignFilter(), PageRequest(1, 0))
        assert page.total == 2 and [c.id for c in page.items] == [second.id]
        locked = await campaigns.get_for_update(org, second.id or 0)
        assert locked is not None
        await campaigns.update(locked.move("start", NOW + timedelta(minutes=1)))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        campaigns = await r.get(CampaignRepository)
        running = await campaigns.list(org, CampaignFilter(status="running"), PageRequest())
        assert [c.id for c in running.items] == [second.id] and running.items[0].started_at == NOW + timedelta(
            minutes=1)
        assert (await campaigns.list(org, CampaignFilter(status="paused"), PageRequest())).total == 0


async def test_contacts_are_unique_per_campaign_counted_by_status_and_cancelled_in_one_go(container: Any) -> None:
    org = await new_organization(container)
    campaign = await _campaign(container, org)
    other_campaign = await _campaign(container, org)
    cid = campaign.id or 0
    async with container() as r:
        contacts = await r.get(ContactRepository)
        assert not await contacts.exists_in(org, cid)
        assert await contacts.add_many(org, cid, [_contact(org, cid, n) for n in range(5)]) == 5
        # a phone the campaign has is a duplicate; another campaign may have it
        assert await contacts.add_many(org, cid, [_contact(org, cid, n) for n in (3, 4, 5)]) == 1
        assert await contacts.add_many(org, other_campaign.id or 0, [_contact(org, other_campaign.id or 0, 1)]) == 1
        assert await contacts.add_many(org, cid, []) == 0
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts, campaigns = await r.get(ContactRepository), await r.get(CampaignRepository)
        assert await contacts.exists_in(org, cid)
        page = await contacts.list(org, cid, ContactFilter(), PageRequest(2, 1))
        assert page.total == 6 and [c.phone for c in page.items] == ["+14155550001", "+14155550002"]
        first = (await contacts.list(org, cid, ContactFilter(), PageRequest(1, 0))).items[0]
        assert first.custom_data == {"n": 0} and first.status == "pending" and first.created_at == NOW
        dialing = first.move("dial", NOW, last_call_id="00000000-0000-4000-8000-000000000001")
        await contacts.update(dialing)
        waiting = (await contacts.list(org, cid, ContactFilter(), PageRequest(1, 1))).items[0]
        waiting = waiting.move("dial", NOW).move("retry", NOW, next_attempt_at=NOW + timedelta(minutes=10),
                                                 reason="busy")
        await contacts.update(waiting)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts, campaigns = await r.get(ContactRepository), await r.get(CampaignRepository)
        got = await contacts.get(org, cid, first.id or 0)
        assert got is not None and got.status == "dialing" and got.attempts == 1 and got.last_call_id
        assert await contacts.get(org, other_campaign.id or 0, first.id or 0) is None
        assert await campaigns.stats(org, cid) == CampaignStats(pending=4, dialing=1, retry_wait=1)
        assert (await contacts.list(org, cid, ContactFilter(status="retry_wait"), PageRequest())).total == 1
        moved = await contacts.cancel_open(org, cid, "campaign_cancelled", NOW)
        assert len(set(moved)) == 5 and waiting.id in moved and first.id not in moved  # the dialing one stays
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts, campaigns = await r.get(ContactRepository), await r.get(CampaignRepository)
        assert await campaigns.stats(org, cid) == CampaignStats(dialing=1, cancelled=5)
        cancelled = (await contacts.list(org, cid, ContactFilter(status="cancelled"), PageRequest(1, 0))).items[0]
        assert cancelled.reason == "campaign_cancelled" and cancelled.next_attempt_at is None
        assert await campaigns.stats(org, other_campaign.id or 0) == CampaignStats(pending=1)


async def test_attempts_are_numbered_once_and_deleted_with_their_contact(container: Any) -> None:
    org = await new_organization(container)
    campaign = await _campaign(container, org)
    cid = campaign.id or 0
    async with container() as r:
        contacts = await r.get(ContactRepository)
        await contacts.add_many(org, cid, [_contact(org, cid, n) for n in range(2)])
        contact = (await contacts.list(org, cid, ContactFilter(), PageRequest(1, 0))).items[0]
        for n in (2, 1):
            await contacts.add_attempt(org, ContactAttempt(contact.id or 0, n, None, "busy", NOW,
                                                           NOW + timedelta(seconds=n)))
        with pytest.raises(Conflict):
            await contacts.add_attempt(org, ContactAttempt(contact.id or 0, 1, None, "busy", NOW, NOW))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts = await r.get(ContactRepository)
        attempts = await contacts.attempts(org, contact.id or 0)
        assert [(a.attempt, a.status, a.ended_at) for a in attempts] == [
            (1, "busy", NOW + timedelta(seconds=1)), (2, "busy", NOW + timedelta(seconds=2))]
        assert await contacts.attempts(org + 1000, contact.id or 0) == []
        await contacts.delete(org, cid, contact.id or 0)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts = await r.get(ContactRepository)
        assert await contacts.get(org, cid, contact.id or 0) is None
        assert await contacts.attempts(org, contact.id or 0) == []
        # the phone may be added again once its contact is gone
        assert await contacts.add_many(org, cid, [replace(_contact(org, cid, 0))]) == 1
        await (await r.get(UnitOfWork)).commit()


async def test_deleting_a_campaign_takes_its_contacts_and_attempts(container: Any) -> None:
    org = await new_organization(container)
    campaign = await _campaign(container, org)
    cid = campaign.id or 0
    async with container() as r:
        contacts = await r.get(ContactRepository)
        await contacts.add_many(org, cid, [_contact(org, cid, n) for n in range(3)])
        contact = (await contacts.list(org, cid, ContactFilter(), PageRequest(1, 0))).items[0]
        await contacts.add_attempt(org, ContactAttempt(contact.id or 0, 1, None, "completed", NOW, NOW))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        await (await r.get(CampaignRepository)).delete(org + 1000, cid)  # another organization's: no effect
        assert await (await r.get(CampaignRepository)).get(org, cid) is not None
        await (await r.get(CampaignRepository)).delete(org, cid)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts = await r.get(ContactRepository)
        assert await (await r.get(CampaignRepository)).get(org, cid) is None
        assert not await contacts.exists_in(org, cid)
        assert await contacts.attempts(org, contact.id or 0) == []


async def test_a_contact_is_found_by_its_campaign_and_phone(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    campaign = await _campaign(container, org)
    second = await _campaign(container, org)
    cid = campaign.id or 0
    async with container() as r:
        contacts = await r.get(ContactRepository)
        await contacts.add_many(org, cid, [_contact(org, cid, n) for n in range(3)])
        found = await contacts.find_by_phone(org, cid, "+14155550001")
        assert found is not None and (found.phone, found.name, found.campaign_id) == ("+14155550001", "Contact 1", cid)
        assert found == await contacts.get(org, cid, found.id or 0)
        assert await contacts.find_by_phone(org, second.id or 0, "+14155550001") is None
        assert await contacts.find_by_phone(other, cid, "+14155550001") is None
        assert await contacts.find_by_phone(org, cid, "+14155550009") is None


async def test_a_contact_keeps_the_depth_it_was_added_at(container: Any) -> None:
    """The depth of the trigger action that added a contact reads back everywhere the dialer reads contacts, and
    saving its moves never changes it."""
    org = await new_organization(container)
    campaign = await _campaign(container, org)
    cid = campaign.id or 0
    async with container() as r:
        await (await r.get(ContactRepository)).add_many(org, cid, [
            _contact(org, cid, 1, next_attempt_at=NOW, cause_depth=2), _contact(org, cid, 2, next_attempt_at=NOW)])
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts = await r.get(ContactRepository)
        deep = await contacts.find_by_phone(org, cid, "+14155550001")
        assert deep is not None and deep.cause_depth == 2
        assert (await contacts.get(org, cid, deep.id or 0)) == deep
        listed = (await contacts.list(org, cid, ContactFilter(), PageRequest(10, 0))).items
        assert [c.cause_depth for c in listed] == [2, 0]
        due = await (await r.get(DialerStore)).due_contacts(org, cid, NOW, 10)
        assert [(c.phone, c.cause_depth) for c in due] == [("+14155550001", 2), ("+14155550002", 0)]
        await contacts.update(replace(deep.move("dial", NOW, last_call_id="c1"), cause_depth=0))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        saved = await (await r.get(ContactRepository)).get(org, cid, deep.id or 0)
        assert saved is not None and (saved.status, saved.last_call_id, saved.cause_depth) == ("dialing", "c1", 2)


async def test_the_campaigns_using_a_schedule_are_the_running_and_paused_ones(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    draft = await _campaign(container, org, schedule_id=5)
    running = await _campaign(container, org, schedule_id=5, status="running")
    paused = await _campaign(container, org, schedule_id=5, status="paused")
    await _campaign(container, org, schedule_id=6, status="running")
    await _campaign(container, org, schedule_id=5, status="cancelled")
    await _campaign(container, other, schedule_id=5, status="running")
    async with container() as r:
        campaigns = await r.get(CampaignRepository)
        assert await campaigns.using_schedule(org, 5) == [running.id, paused.id]
        assert await campaigns.using_schedule(org, 7) == []
        assert draft.id not in await campaigns.using_schedule(org, 5)


async def test_completion_round_trips_and_contacts_are_counted(container: Any) -> None:
    org = await new_organization(container)
    manual = await _campaign(container, org, completion="manual")
    plain = await _campaign(container, org)
    async with container() as r:
        campaigns, contacts = await r.get(CampaignRepository), await r.get(ContactRepository)
        assert (await campaigns.get(org, manual.id or 0)).completion == "manual"  # type: ignore[union-attr]
        assert (await campaigns.get(org, plain.id or 0)).completion == "when_empty"  # type: ignore[union-attr]
        await contacts.add_many(org, manual.id or 0, [_contact(org, manual.id or 0, n) for n in range(3)])
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts = await r.get(ContactRepository)
        assert await contacts.count(org, manual.id or 0) == 3
        assert await contacts.count(org, plain.id or 0) == 0
        assert await contacts.count(org + 1000, manual.id or 0) == 0


async def test_replanning_makes_only_the_contacts_waiting_for_their_window_due(container: Any) -> None:
    org = await new_organization(container)
    campaign = await _campaign(container, org)
    later = NOW + timedelta(hours=5)
    cid = campaign.id or 0
    rows = [
        _contact(org, cid, 1, next_attempt_at=later, reason="outside_calling_hours"),  # re-planned
        _contact(org, cid, 2, status="retry_wait", next_attempt_at=later, reason="outside_calling_hours"),  # too
        _contact(org, cid, 3, status="retry_wait", next_attempt_at=later, reason="busy"),  # its retry delay holds
        _contact(org, cid, 4, next_attempt_at=NOW - timedelta(minutes=1)),  # due already
        _contact(org, cid, 5, status="completed", reason="outside_calling_hours"),  # final
    ]
    async with container() as r:
        await (await r.get(ContactRepository)).add_many(org, cid, rows)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        contacts = await r.get(ContactRepository)
        assert await contacts.replan_waiting(org + 1000, cid, "outside_calling_hours", NOW) == 0
        assert await contacts.replan_waiting(org, cid, "outside_calling_hours", NOW) == 2
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        listed = (await (await r.get(ContactRepository)).list(org, cid, ContactFilter(), PageRequest(10, 0))).items
        by_phone = {c.phone[-1]: (c.status, c.next_attempt_at, c.reason) for c in listed}
        assert by_phone == {"1": ("pending", NOW, None), "2": ("retry_wait", NOW, None),
                            "3": ("retry_wait", later, "busy"), "4": ("pending", NOW - timedelta(minutes=1), None),
                            "5": ("completed", None, "outside_calling_hours")}

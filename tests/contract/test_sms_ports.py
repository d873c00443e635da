"""SMS messages behave the same on memory, SQLite and PostgreSQL: a round trip keeping every status event and the
carrier's state, the list's filters, the receipts job's due queue and the opt-out list lookup."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.dnc import DncRepository
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.sms import MessageRef, SmsFilter, SmsRepository
from domain.dnc import DncList
from domain.sms import OPT_OUT_LIST_NAME, SmsMessage, StatusEvent
from tests.support.apps import new_organization

NOW = datetime(2026, 3, 2, 9, tzinfo=UTC)


def _message(org: int, n: int, **fields: Any) -> SmsMessage:
    at = NOW + timedelta(minutes=n)
    values: dict[str, Any] = {"direction": "outbound", "status": "queued", **fields}
    return SmsMessage(None, org, from_phone="+1555010099", to_phone=f"+1415555{n:04d}", body=f"Message {n} 😀",
                      encoding="ucs2", segments=1, created_at=at, updated_at=at,
                      status_events=(StatusEvent(values["status"], at),), **values)


async def _add(container: Any, *messages: SmsMessage) -> list[SmsMessage]:
    async with container() as r:
        repo = await r.get(SmsRepository)
        stored = [await repo.add(m) for m in messages]
        await (await r.get(UnitOfWork)).commit()
    return stored


async def test_messages_round_trip_with_their_events_and_carrier_state(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    (first,) = await _add(container, _message(org, 1))
    assert first.id is not None and first.body == "Message 1 😀"
    due_at = NOW + timedelta(seconds=30)
    moved = replace(first, carrier_id=f"SM-{org}-1", carrier_state={"pending": [{"status": "sent", "n": 1}]},
                    next_check_at=due_at)
    moved, _ = moved.receive("delivered", NOW + timedelta(seconds=3))
    moved, _ = moved.receive("sent", NOW + timedelta(seconds=1))
    async with container() as r:
        repo = await r.get(SmsRepository)
        assert await repo.get(org, first.id) == first
        assert await repo.get(other, first.id) is None
        await repo.update(moved)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        repo = await r.get(SmsRepository)
        got = await repo.get(org, first.id, for_update=True)
        assert got == moved and got is not None
        assert [(e.status, e.applied) for e in got.status_events] == [
            ("queued", True), ("delivered", True), ("sent", False)]
        assert await repo.find_by_carrier_id(f"SM-{org}-1") == moved
        assert await repo.find_by_carrier_id("SM-unknown") is None
        assert MessageRef(org, first.id) in await repo.due(due_at, 100)
        assert MessageRef(org, first.id) not in await repo.due(due_at - timedelta(seconds=1), 100)
        assert (await repo.next_due()) is not None
        await (await r.get(UnitOfWork)).commit()


async def test_the_list_filters_and_pages_newest_first(container: Any) -> None:
    org = await new_organization(container)
    a, b, c, d = await _add(container, _message(org, 1), _message(org, 2, status="failed"),
                            _message(org, 3, direction="inbound", status="received"), _message(org, 4))
    async with container() as r:
        repo = await r.get(SmsRepository)

        async def ids(page: PageRequest = PageRequest(25, 0), **filters: Any) -> list[int | None]:
            return [m.id for m in (await repo.list(org, SmsFilter(**filters), page)).items]

        assert await ids() == [d.id, c.id, b.id, a.id]
        assert await ids(to=a.to_phone) == [a.id]
        assert await ids(status="failed") == [b.id]
        assert await ids(direction="inbound") == [c.id]
        assert await ids(created_after=NOW + timedelta(minutes=2), created_before=NOW + timedelta(minutes=4)) == [
            c.id, b.id]
        page = await repo.list(org, SmsFilter(), PageRequest(2, 1))
        assert [m.id for m in page.items] == [c.id, b.id] and page.total == 4
        await (await r.get(UnitOfWork)).commit()


async def test_opt_out_lists_are_found_by_name(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        dnc = await r.get(DncRepository)
        await dnc.add_list(DncList(None, org, "Legal", None, NOW, NOW))
        mine = await dnc.add_list(DncList(None, org, OPT_OUT_LIST_NAME, None, NOW, NOW))
        await dnc.add_list(DncList(None, other, OPT_OUT_LIST_NAME, None, NOW, NOW))
        repo = await r.get(SmsRepository)
        assert await repo.opt_out_list_ids(org, OPT_OUT_LIST_NAME) == [mine.id]
        await (await r.get(UnitOfWork)).commit()


async def test_the_opt_out_list_is_made_once_per_organization(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        repo = await r.get(SmsRepository)
        made = await repo.ensure_opt_out_list(org, OPT_OUT_LIST_NAME, "kept by SMS", NOW)
        assert await repo.ensure_opt_out_list(org, OPT_OUT_LIST_NAME, "kept by SMS", NOW) == made
        theirs = await repo.ensure_opt_out_list(other, OPT_OUT_LIST_NAME, "kept by SMS", NOW)
        assert theirs != made
        assert await repo.opt_out_list_ids(org, OPT_OUT_LIST_NAME) == [made]
        listed = await (await r.get(DncRepository)).get_list(org, made)
        assert listed is not None and (listed.name, listed.description) == (OPT_OUT_LIST_NAME, "kept by SMS")
        await (await r.get(UnitOfWork)).commit()


async def test_the_organization_that_last_texted_a_number_from_a_sender_is_found_across_organizations(
        container: Any) -> None:
    first, second = await new_organization(container), await new_organization(container)
    shared, person = "+1555010099", "+14155559001"
    await _add(container, replace(_message(first, 1), to_phone=person))
    async with container() as r:
        repo = await r.get(SmsRepository)
        assert await repo.last_texted_by(shared, person) == first
        assert await repo.last_texted_by(shared, "+14155559002") is None
        assert await repo.last_texted_by("+14155550000", person) is None
    await _add(container, replace(_message(second, 2), to_phone=person),
               replace(_message(first, 3, direction="inbound", status="received"), from_phone=person,
                       to_phone=shared))  # an inbound message is no text sent to the number
    async with container() as r:
        assert await (await r.get(SmsRepository)).last_texted_by(shared, person) == second

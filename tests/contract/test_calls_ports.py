"""Calls, call logs, DNC, telephony resources, usage and blobs behave the same on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.blobs.filesystem import FilesystemBlobStorage
from adapters.memory.blobs import InMemoryBlobStorage
from application.ports.agents import AgentRepository
from application.ports.calls import CallFilter, CallLogFilter, CallLogRepository, CallRepository
from application.ports.dnc import DncRepository, DncScreener
from application.ports.platform import PageRequest, UnitOfWork
from application.ports.telephony import PhoneNumberRepository, TelephonyProviderRepository
from application.ports.usage import UsageRecorder
from domain.agents import Agent
from domain.calls import Call, CallLog
from domain.dnc import DncList
from domain.errors import Conflict
from domain.telephony import PhoneNumber, TelephonyProvider
from tests.support.apps import new_organization

NOW = datetime(2026, 2, 2, 12, tzinfo=UTC)


async def _agent(container: Any, org: int) -> int:
    async with container() as r:
        agent = await (await r.get(AgentRepository)).add(Agent(None, org, "Desk", status="active", created_at=NOW,
                                                               updated_at=NOW))
        await (await r.get(UnitOfWork)).commit()
    return agent.id or 0


def _call(org: int, agent: int, n: int, **fields: Any) -> Call:
    return Call(f"00000000-0000-4000-8000-{org:06d}{n:06d}", org, agent, "+14155550100", "+1555010099",
                custom_data={"k": [n]}, created_at=NOW + timedelta(seconds=n), updated_at=NOW,
                deadline_at=NOW + timedelta(hours=1), **fields)


async def test_calls_are_stored_filtered_scoped_and_found_by_the_worker(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    agent, other_agent = await _agent(container, org), await _agent(container, other)
    async with container() as r:
        calls = await r.get(CallRepository)
        for n in range(3):
            await calls.add(_call(org, agent, n))
        await calls.add(_call(other, other_agent, 9))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        calls = await r.get(CallRepository)
        first = _call(org, agent, 0)
        got = await calls.get(org, first.id)
        assert got is not None and got.custom_data == {"k": [0]} and got.created_at == NOW
        assert await calls.get(other, first.id) is None
        page = await calls.list(org, CallFilter(), PageRequest(2, 0))
        assert page.total == 3 and [c.id for c in page.items] == [_call(org, agent, n).id for n in (2, 1)]
        assert (await calls.list(org, CallFilter(created_after=NOW + timedelta(seconds=1)), PageRequest())).total == 2
        assert [c.id for c in await calls.oldest_queued(org, 5)] == [_call(org, agent, n).id for n in range(3)]
        assert await calls.organizations_with_queued(10, org) == [org]
        locked = await calls.get_for_update(org, first.id)
        await calls.lock_organization(org)
        dialled, _ = locked.move("dial", NOW, telephony_ref="sim-1", telephony_state={"cursor": 0},
                                 next_check_at=NOW + timedelta(seconds=1), deadline_at=NOW + timedelta(minutes=5))
        await calls.update(dialled)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        calls = await r.get(CallRepository)
        assert await calls.count_active(org) == 1 and await calls.count_active(other) == 0
        assert [x.call_id for x in await calls.due(NOW + timedelta(seconds=1), 10, org)] == [first.id]
        assert await calls.due(NOW, 10, org) == []
        overdue = await calls.overdue(NOW + timedelta(minutes=30), 10, org)
        assert [x.call_id for x in overdue] == [first.id]
        assert len(await calls.overdue(NOW + timedelta(hours=2), 10, org)) == 3
        got = await calls.get(org, first.id)
        assert got.status == "ringing" and got.telephony_state == {"cursor": 0} and got.started_at == NOW
        answered, _ = got.move("answer", NOW)
        done, _ = answered.move("complete", NOW + timedelta(seconds=30), duration_seconds=30)
        await calls.update(done)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        stats = await (await r.get(CallRepository)).stats(org, NOW - timedelta(days=1), NOW + timedelta(days=1))
        assert stats.by_status == {"completed": 1, "queued": 2}
        assert (stats.dialled, stats.answered, stats.answered_seconds, stats.total_seconds) == (1, 1, 30, 30)
        empty = await (await r.get(CallRepository)).stats(org, NOW + timedelta(days=1), NOW + timedelta(days=2))
        assert empty.by_status == {} and empty.dialled == 0


async def test_call_logs_are_scoped_and_filtered(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        logs = await r.get(CallLogRepository)
        ids = []
        for n, status in enumerate(["completed", "busy", "completed"]):
            log = await logs.add(CallLog(None, org, f"call-{org}-{n}", 10 + n % 2, "outbound", "+1", "+2", status,
                                         "hangup", "x", 12, [{"role": "agent", "text": "hi", "at_ms": 0}], "summary",
                                         recording_key="recordings/x.wav" if n == 0 else None,
                                         ended_at=NOW + timedelta(minutes=n), created_at=NOW))
            ids.append(log.id)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        logs = await r.get(CallLogRepository)
        got = await logs.get(org, ids[0])
        assert got is not None and got.transcript == [{"role": "agent", "text": "hi", "at_ms": 0}]
        assert got.recording_available and await logs.get(other, ids[0]) is None
        assert (await logs.list(org, CallLogFilter(status="completed"), PageRequest())).total == 2
        assert [x.id for x in (await logs.list(org, CallLogFilter(agent_id=11), PageRequest())).items] == [ids[1]]
        window = CallLogFilter(start=NOW + timedelta(minutes=1), end=NOW + timedelta(minutes=2))
        assert [x.id for x in (await logs.list(org, window, PageRequest())).items] == [ids[1]]
        assert await logs.find_recording(ids[0]) == (org, "recordings/x.wav")
        assert await logs.find_recording(ids[1]) == (org, None)
        assert await logs.find_recording(10**12) is None


async def test_dnc_lists_entries_and_screening(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        dnc = await r.get(DncRepository)
        a = await dnc.add_list(DncList(None, org, "Opt-outs", None, NOW, NOW))
        b = await dnc.add_list(DncList(None, org, "Legal", "court orders", NOW, NOW))
        theirs = await dnc.add_list(DncList(None, other, "Theirs", None, NOW, NOW))
        assert await dnc.add_entries(org, a.id, [("+14155550100", "asked"), ("+14155550101", None)], NOW) == 2
        assert await dnc.add_entries(org, a.id, [("+14155550100", "again"), ("+14155550102", None)], NOW) == 1
        assert await dnc.add_entries(org, b.id, [("+14155550100", None)], NOW) == 1
        assert await dnc.add_entries(other, theirs.id, [("+14155550109", None)], NOW) == 1
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        dnc, screener = await r.get(DncRepository), await r.get(DncScreener)
        assert (await dnc.get_list(org, a.id)).entry_count == 3
        assert await dnc.get_list(other, a.id) is None
        assert [x.name for x in (await dnc.lists(org, PageRequest())).items] == ["Opt-outs", "Legal"]
        entries = await dnc.entries(org, a.id, PageRequest(2, 0))
        assert entries.total == 3 and [e.phone_number for e in entries.items] == ["+14155550100", "+14155550101"]
        assert entries.items[0].reason == "asked"  # an existing entry is kept as it is
        found = await screener.screen(org, ["+14155550100", "+14155550102", "+14155550109", "+14155550100"])
        assert {k: sorted(v) for k, v in found.items()} == {"+14155550100": sorted([a.id, b.id]),
                                                            "+14155550102": [a.id]}
        assert await screener.screen(other, ["+14155550100"]) == {}
        assert await screener.screen(org, []) == {}
        assert await dnc.remove_entry(org, a.id, "+14155550101") is True
        assert await dnc.remove_entry(org, a.id, "+14155550101") is False
        assert await dnc.remove_entry(other, a.id, "+14155550100") is False
        await dnc.touch_list(org, a.id, NOW + timedelta(hours=1))
        await dnc.touch_list(other, b.id, NOW + timedelta(hours=2))  # another organization's list: no effect
        assert (await dnc.get_list(org, a.id)).updated_at == NOW + timedelta(hours=1)
        assert (await dnc.get_list(org, b.id)).updated_at == NOW
        await dnc.delete_list(org, b.id)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        screener = await r.get(DncScreener)
        assert await screener.screen(org, ["+14155550100", "+14155550101"]) == {"+14155550100": [a.id]}


async def test_screening_a_large_batch(container: Any) -> None:
    org = await new_organization(container)
    numbers = [f"+1415555{n:04d}" for n in range(3000)]
    async with container() as r:
        dnc = await r.get(DncRepository)
        listed = await dnc.add_list(DncList(None, org, "Big", None, NOW, NOW))
        assert await dnc.add_entries(org, listed.id, [(n, None) for n in numbers[::3]], NOW) == 1000
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        found = await (await r.get(DncScreener)).screen(org, numbers)
        assert set(found) == set(numbers[::3])


async def test_providers_have_one_builtin_default_and_numbers_are_unique(container: Any) -> None:
    org = await new_organization(container)
    main, second = f"+1415{org:07d}", f"+1416{org:07d}"  # a number has one owner in the whole database
    async with container() as r:
        providers = await r.get(TelephonyProviderRepository)
        builtin = await providers.ensure_default(org, NOW)
        assert builtin.builtin and builtin.is_default and builtin.type == "simulator"
        assert (await providers.ensure_default(org, NOW)).id == builtin.id
        twilio = await providers.add(TelephonyProvider(None, org, "Twilio", "twilio", credentials_sealed="sealed",
                                                       credential_fields=("auth_token",), created_at=NOW,
                                                       updated_at=NOW))
        await providers.update(replace(twilio, is_default=True, name="Twilio EU"))
        await providers.clear_default(org, twilio.id)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        providers, numbers = await r.get(TelephonyProviderRepository), await r.get(PhoneNumberRepository)
        assert [(p.name, p.is_default, p.builtin) for p in await providers.list(org)] == [
            ("Parley simulator", False, True), ("Twilio EU", True, False)]
        assert (await providers.default(org)).id == twilio.id
        stored = await providers.get(org, twilio.id)
        assert stored.credentials_sealed == "sealed" and stored.credential_fields == ("auth_token",)
        first = await numbers.add(PhoneNumber(None, org, main, builtin.id, created_at=NOW, updated_at=NOW))
        assigned = await numbers.add(PhoneNumber(None, org, second, builtin.id, inbound_agent_id=77,
                                                 created_at=NOW, updated_at=NOW))
        with pytest.raises(Conflict):
            await numbers.add(PhoneNumber(None, org, main, builtin.id, created_at=NOW, updated_at=NOW))
        await (await r.get(UnitOfWork)).rollback()
    async with container() as r:
        numbers = await r.get(PhoneNumberRepository)
        assert await numbers.list(org) == []  # rolled back
        first = await numbers.add(PhoneNumber(None, org, main, builtin.id, created_at=NOW, updated_at=NOW))
        assigned = await numbers.add(PhoneNumber(None, org, second, builtin.id, inbound_agent_id=77,
                                                 created_at=NOW, updated_at=NOW))
        assert (await numbers.outbound_for_agent(org, 77)).id == assigned.id
        assert (await numbers.outbound_for_agent(org, 5)).id == first.id
        assert await numbers.count_for_provider(org, builtin.id) == 2
        await numbers.update(replace(first, label="Main", voice=False))
        await numbers.delete(org, assigned.id)
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        numbers = await r.get(PhoneNumberRepository)
        got = await numbers.get(org, first.id)
        assert got.label == "Main" and got.voice is False
        assert await numbers.outbound_for_agent(org, 77) is None


async def test_usage_is_recorded_once_per_reference(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        usage = await r.get(UsageRecorder)
        await usage.record(org, "call_seconds", 42, NOW, "call:1")
        await usage.record(org, "call_seconds", 42, NOW, "call:1")
        await usage.record(org, "call_seconds", 7, NOW, "call:2")
        await usage.record(org, "call_seconds", 100, NOW + timedelta(days=2), "call:3")
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        usage = await r.get(UsageRecorder)
        assert await usage.total(org, "call_seconds", NOW, NOW + timedelta(days=1)) == 49
        assert await usage.total(org, "sms", NOW, NOW + timedelta(days=1)) == 0


@pytest.mark.parametrize("kind", ["memory", "filesystem"])
async def test_blob_storage(kind: str, tmp_path: Path) -> None:
    blobs = InMemoryBlobStorage() if kind == "memory" else FilesystemBlobStorage(tmp_path / "blobs")
    await blobs.put("recordings/1/a.wav", b"RIFF", "audio/wav")
    assert await blobs.get("recordings/1/a.wav") == b"RIFF"
    await blobs.put("recordings/1/a.wav", b"RIFF2", "audio/wav")
    assert await blobs.get("recordings/1/a.wav") == b"RIFF2"
    assert await blobs.get("recordings/1/b.wav") is None
    for bad in ("../etc/passwd", "/abs", "a//b", "a/../b"):
        with pytest.raises(ValueError):
            await blobs.put(bad, b"x", "text/plain")
    await blobs.delete("recordings/1/a.wav")
    assert await blobs.get("recordings/1/a.wav") is None


async def test_a_new_call_goes_out_through_the_default_provider_else_the_builtin(container: Any) -> None:
    org = await new_organization(container)
    async with container() as r:
        providers = await r.get(TelephonyProviderRepository)
        first = await providers.for_new_call(org, NOW)  # the organization's first call creates the built-in
        assert first.builtin and first.is_default
        assert (await providers.ensure_default(org, NOW)).id == first.id
        twilio = await providers.add(TelephonyProvider(None, org, "Twilio", "twilio", created_at=NOW, updated_at=NOW))
        assert (await providers.for_new_call(org, NOW)).id == first.id
        await providers.update(replace(twilio, is_default=True))
        await providers.clear_default(org, twilio.id)
        assert (await providers.for_new_call(org, NOW)).id == twilio.id
        await providers.update(replace(twilio, is_default=False))
        assert (await providers.for_new_call(org, NOW)).id == first.id  # no default at all: the built-in
        await (await r.get(UnitOfWork)).rollback()


async def test_an_agent_is_read_with_its_current_published_version(container: Any) -> None:
    from domain.agents import AgentVersion

    org, other = await new_organization(container), await new_organization(container)
    async with container() as r:
        agents = await r.get(AgentRepository)
        draft = await agents.add(Agent(None, org, "Draft", created_at=NOW, updated_at=NOW))
        published = await agents.add(Agent(None, org, "Published", current_version=2, created_at=NOW,
                                           updated_at=NOW))
        await agents.add_version(org, AgentVersion(published.id, 1, {"prompt": "one"}, NOW, None))
        await agents.add_version(org, AgentVersion(published.id, 2, {"prompt": "two"}, NOW, 7))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        agents = await r.get(AgentRepository)
        assert await agents.get_with_current_version(org, draft.id) == (await agents.get(org, draft.id), None)
        found = await agents.get_with_current_version(org, published.id)
        assert found is not None and found[0] == await agents.get(org, published.id)
        assert found[1] == AgentVersion(published.id, 2, {"prompt": "two"}, NOW, 7)
        assert await agents.get_with_current_version(other, published.id) is None
        await agents.delete(org, draft.id, NOW)
        assert await agents.get_with_current_version(org, draft.id) is None
        await (await r.get(UnitOfWork)).rollback()


async def test_a_number_has_one_owning_organization(container: Any) -> None:
    first, other = await new_organization(container), await new_organization(container)
    number = f"+1417{first:07d}"
    async with container() as r:
        providers, numbers = await r.get(TelephonyProviderRepository), await r.get(PhoneNumberRepository)
        mine = await providers.ensure_default(first, NOW)
        theirs = await providers.ensure_default(other, NOW)
        held = await numbers.add(PhoneNumber(None, first, number, mine.id, created_at=NOW, updated_at=NOW))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        numbers = await r.get(PhoneNumberRepository)
        with pytest.raises(Conflict) as refused:
            await numbers.add(PhoneNumber(None, other, number, theirs.id, created_at=NOW, updated_at=NOW))
        assert refused.value.code == "phone_number_unavailable" and "organization" not in refused.value.message
        await numbers.delete(first, held.id)
        moved = await numbers.add(PhoneNumber(None, other, number, theirs.id, created_at=NOW, updated_at=NOW))
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        assert [n.id for n in await (await r.get(PhoneNumberRepository)).list(other)] == [moved.id]

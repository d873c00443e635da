"""The audit log behaves the same on memory, SQLite and PostgreSQL: an event round trip (actor, resource, field
names), the list newest first with each filter and paging, one organization never reading another's, and the purge
by age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.audit import AuditFilter, AuditLog
from application.ports.platform import PageRequest, UnitOfWork
from domain.audit import ActorType, AuditActor, AuditEvent
from tests.support.apps import new_organization

LONG_AGO = datetime(2000, 1, 3, 9, tzinfo=UTC)
"""Before anything another test of the shared databases records: the purge below reaches only these events."""


def _event(org: int, n: int, *, actor: AuditActor, action: str = "agent.updated", resource_id: str | None = "7",
           fields: tuple[str, ...] = ()) -> AuditEvent:
    return AuditEvent(None, org, actor, action, action.split(".")[0], resource_id, "PATCH", f"/v2/agents/{n}",
                      200, "203.0.113.7", f"req-{n}", LONG_AGO + timedelta(hours=n), fields)


async def test_events_round_trip_filter_and_purge(container: Any) -> None:
    org, other = await new_organization(container), await new_organization(container)
    key = AuditActor(ActorType.API_KEY, 41, "ci (parley_sk_Ab…wxyz)")
    user = AuditActor(ActorType.USER, 42, "ada@example.com")
    async with container() as r:
        log = await r.get(AuditLog)
        first = await log.add(_event(org, 1, actor=key, fields=("name", "prompt")))
        await log.add(_event(org, 2, actor=user, action="agent.created", resource_id="8"))
        await log.add(_event(org, 3, actor=key, action="campaign.started", resource_id=None))
        await log.add(_event(other, 4, actor=key))
        await (await r.get(UnitOfWork)).commit()
    assert first.id is not None
    async with container() as r:
        log = await r.get(AuditLog)
        page = await log.list(org, AuditFilter(), PageRequest())
        assert [e.action for e in page.items] == ["campaign.started", "agent.created", "agent.updated"]
        assert page.total == 3
        assert page.items[2] == first and first.fields == ("name", "prompt") and first.actor == key
        assert page.items[0].resource_id is None and page.items[0].resource_type == "campaign"

        async def actions(**filters: Any) -> list[str]:
            return [e.action for e in (await log.list(org, AuditFilter(**filters), PageRequest())).items]

        assert await actions(actor_type=ActorType.USER) == ["agent.created"]
        assert await actions(actor_type=ActorType.API_KEY, actor_id=41) == ["campaign.started", "agent.updated"]
        assert await actions(actor_type=ActorType.API_KEY, actor_id=42) == []
        assert await actions(action="agent.updated") == ["agent.updated"]
        assert await actions(resource_type="agent") == ["agent.created", "agent.updated"]
        assert await actions(resource_type="agent", resource_id="8") == ["agent.created"]
        assert await actions(created_after=LONG_AGO + timedelta(hours=2)) == ["campaign.started", "agent.created"]
        assert await actions(created_before=LONG_AGO + timedelta(hours=2)) == ["agent.updated"]
        second = await log.list(org, AuditFilter(), PageRequest(1, 1))
        assert [e.action for e in second.items] == ["agent.created"] and second.total == 3
        past_the_end = await log.list(org, AuditFilter(), PageRequest(10, 5))
        assert past_the_end.items == [] and past_the_end.total == 3
        theirs = await log.list(other, AuditFilter(), PageRequest())
        assert [e.path for e in theirs.items] == ["/v2/agents/4"]

    async with container() as r:
        log = await r.get(AuditLog)
        assert await log.purge(LONG_AGO + timedelta(hours=2, minutes=30)) == 2  # this test's two oldest
        await (await r.get(UnitOfWork)).commit()
    async with container() as r:
        log = await r.get(AuditLog)
        assert [e.action for e in (await log.list(org, AuditFilter(), PageRequest())).items] == ["campaign.started"]

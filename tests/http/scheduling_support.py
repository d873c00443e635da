"""Helpers shared by the scheduling HTTP tests: an app with a manual clock, calendars with weekly rules,
and the outbox rows a tenant's requests wrote."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from adapters.memory.clock import ManualClock
from adapters.sql.engine import create_engine
from adapters.sql.tables import outbox_events
from tests.support.apps import Api, ApiFactory, Tenant

# a Monday, well before the 2026 DST switches in the US (03-08) and the EU (03-29)
START = datetime(2026, 3, 2, 12, tzinfo=UTC)
UNLIMITED = {"rate_limit_per_minute": 1_000_000, "rate_limit_per_hour": 10_000_000}


async def scheduling_api(make_api: ApiFactory, url: str, start: datetime = START) -> Api:
    return await make_api(url, clock=ManualClock(start), **UNLIMITED)


async def make_calendar(api: Api, tenant: Tenant, *, tz: str = "America/New_York", hours: tuple[str, str] | None = (
        "09:00", "17:00"), weekdays: range = range(7), **fields: Any) -> dict[str, Any]:
    body = {"name": "Front desk", "timezone": tz, "horizon_days": 365, **fields}
    created = await api.client.post("/v2/scheduling/calendars", json=body, headers=tenant.headers)
    assert created.status_code == 201, created.text
    calendar = created.json()["data"]
    if hours is not None:
        for weekday in weekdays:
            rule = await api.client.post(f"/v2/scheduling/calendars/{calendar['id']}/rules", headers=tenant.headers,
                                         json={"weekday": weekday, "start_time": hours[0], "end_time": hours[1]})
            assert rule.status_code == 201, rule.text
    return calendar  # type: ignore[no-any-return]


async def slots(api: Api, tenant: Tenant, calendar_id: int, start: str, end: str, tz: str | None = None) -> list[str]:
    params = {"calendar_id": calendar_id, "start": start, "end": end}
    if tz is not None:
        params["timezone"] = tz
    r = await api.client.get("/v2/scheduling/availability", params=params, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return [s["start"] for s in r.json()["data"]["slots"]]


async def book(api: Api, tenant: Tenant, calendar_id: int, slot_start: str, **fields: Any) -> Any:
    return await api.client.post("/v2/scheduling/appointments", headers=tenant.headers,
                                 json={"calendar_id": calendar_id, "slot_start": slot_start, **fields})


async def outbox(api: Api, organization_id: int, prefix: str = "appointment.") -> list[tuple[str, dict[str, Any]]]:
    """(type, data) of the organization's outbox events, oldest first."""
    engine = create_engine(api.settings.database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                sa.select(outbox_events.c.type, outbox_events.c.data)
                .where(outbox_events.c.organization_id == organization_id, outbox_events.c.type.startswith(prefix))
                .order_by(outbox_events.c.id))
            return [(r.type, dict(r.data)) for r in rows]
    finally:
        await engine.dispose()

"""Schedule use cases on the in-memory backend: creates checked against the holiday calendars, PATCH merged
and validated whole, deletion refused while in use, status and preview with the region's holidays."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest

from application.business_hours import (
    CreateSchedule,
    CreateScheduleCommand,
    DeleteSchedule,
    DeleteScheduleCommand,
    GetSchedule,
    GetScheduleCommand,
    GetScheduleStatus,
    GetScheduleStatusCommand,
    PreviewSchedule,
    PreviewScheduleCommand,
    UpdateSchedule,
    UpdateScheduleCommand,
)
from application.ports.business_hours import ScheduleRepository
from application.ports.platform import Clock
from domain.business_hours import HolidayRegion, parse_weekly
from domain.errors import InUse, NotFound, RangeTooLong, ValidationFailed
from tests.application.conftest import NOW, App

NINE_TO_FIVE = parse_weekly([{"day": d, "start": "09:00", "end": "17:00"} for d in range(7)])


def new(actor: object, **fields: object) -> CreateScheduleCommand:
    values = {"name": "Hours", "timezone": "Europe/Berlin", "weekly": NINE_TO_FIVE, **fields}
    return CreateScheduleCommand(actor, **values)  # type: ignore[arg-type]


async def test_create_checks_the_region_and_update_revalidates_the_merged_document(app: App) -> None:
    actor = await app.actor()
    with pytest.raises(ValidationFailed) as unknown:
        await app.run(CreateSchedule, new(actor, holidays=HolidayRegion("DE", "XX")))
    assert list(unknown.value.details["validation_errors"]) == ["holidays.subdivision"]
    with pytest.raises(ValidationFailed) as blank:
        await app.run(CreateSchedule, new(actor, name=" "))
    assert list(blank.value.details["validation_errors"]) == ["name"]

    created = await app.run(CreateSchedule, new(actor, holidays=HolidayRegion("DE", "BE")))
    assert created.created_at == created.updated_at == NOW
    app.clock.advance(minutes=5)
    same = await app.run(UpdateSchedule, UpdateScheduleCommand(actor, created.id, {"name": "Hours"}))
    assert same.updated_at == NOW  # nothing changed: nothing written
    with pytest.raises(ValidationFailed) as bad:
        await app.run(UpdateSchedule, UpdateScheduleCommand(actor, created.id, {"timezone": "Berlin"}))
    assert list(bad.value.details["validation_errors"]) == ["timezone"]
    with pytest.raises(ValidationFailed) as region:
        await app.run(UpdateSchedule, UpdateScheduleCommand(actor, created.id, {"holidays": {"country": "ZZ"}}))
    assert list(region.value.details["validation_errors"]) == ["holidays.country"]
    changed = await app.run(UpdateSchedule, UpdateScheduleCommand(
        actor, created.id, {"holidays": {"subdivision": "BY"}, "exceptions": [{"date": "2026-12-24",
                                                                               "closed": True}]}))
    assert changed.holidays == HolidayRegion("DE", "BY") and changed.updated_at == NOW + timedelta(minutes=5)
    assert await app.run(GetSchedule, GetScheduleCommand(actor, created.id)) == changed
    other = await app.actor()
    with pytest.raises(NotFound):
        await app.run(GetSchedule, GetScheduleCommand(other, created.id))


async def test_status_and_preview_follow_the_regions_holidays(app: App) -> None:
    actor = await app.actor()
    created = await app.run(CreateSchedule, new(actor, holidays=HolidayRegion("DE", "BE")))
    # 2026-03-08 is International Women's Day, a public holiday in Berlin only
    status = await app.run(GetScheduleStatus, GetScheduleStatusCommand(actor, created.id,
                                                                    datetime(2026, 3, 8, 10, tzinfo=UTC)))
    assert (status.status.open, status.status.reason) == (False, "holiday")
    assert status.status.next_open_at == datetime(2026, 3, 9, 8, tzinfo=UTC)
    found = await app.run(PreviewSchedule, PreviewScheduleCommand(actor, created.id, date(2026, 3, 7),
                                                                  date(2026, 3, 10)))
    assert [a.date() for a, _ in found.intervals] == [date(2026, 3, 7), date(2026, 3, 9)]
    assert found.start == datetime(2026, 3, 6, 23, tzinfo=UTC) and found.timezone == "Europe/Berlin"
    with pytest.raises(RangeTooLong):
        await app.run(PreviewSchedule, PreviewScheduleCommand(actor, created.id, date(2026, 3, 1),
                                                              date(2026, 5, 3)))


@dataclass
class _Campaigns:
    using: list[int]

    async def users_of(self, organization_id: int, schedule_id: int) -> list[int]:
        return self.using


async def test_delete_is_refused_while_in_use(app: App) -> None:
    actor = await app.actor()
    created = await app.run(CreateSchedule, new(actor))
    async with app.container() as r:
        delete = DeleteSchedule(await r.get(ScheduleRepository), _Campaigns([9, 4]), await r.get(Clock))
        with pytest.raises(InUse) as refused:
            await delete.execute(DeleteScheduleCommand(actor, created.id))
        assert refused.value.code == "in_use" and refused.value.details == {"campaign_ids": [4, 9]}
    assert await app.run(GetSchedule, GetScheduleCommand(actor, created.id)) == created
    # the default answers that nothing uses a schedule: deletion goes through, once
    await app.run(DeleteSchedule, DeleteScheduleCommand(actor, created.id))
    with pytest.raises(NotFound):
        await app.run(DeleteSchedule, DeleteScheduleCommand(actor, created.id))

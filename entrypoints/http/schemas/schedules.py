"""Schedules: weekly hours, exceptions by date and a holiday region; status and preview.

The business-hours feature's other modules are named ``business_hours``; this one keeps the API's name because
the OpenAPI document names generic components after the module of their type
(``Envelope_entrypoints.http.schemas.schedules.ScheduleOut_``), and the document does not change."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from domain import business_hours as bh
from domain.business_hours import HolidayRegion, Interval, Schedule, ScheduleException, WeeklyInterval
from domain.identity import persisted
from entrypoints.http.schemas import OneLine

Name = Annotated[OneLine, Meta(min_length=1, max_length=bh.NAME_MAX_LENGTH)]
TimeZone = Annotated[str, Meta(min_length=1, max_length=64, description="IANA time zone, e.g. Europe/Berlin")]
Day = Annotated[int, Meta(ge=0, le=6, description="0 = Monday ... 6 = Sunday")]
Start = Annotated[str, Meta(pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description='Local wall time "HH:MM"')]
End = Annotated[str, Meta(pattern=r"^(([01]\d|2[0-3]):[0-5]\d|24:00)$", description=(
    'Local wall time "HH:MM" or "24:00"; before start, the interval runs past midnight into the next day'))]
Day_ = Annotated[str, Meta(pattern=r"^\d{4}-\d{2}-\d{2}$", description="Local date YYYY-MM-DD")]
Country = Annotated[str, Meta(pattern=r"^[A-Z]{2}$", description="ISO 3166-1 alpha-2 country code, e.g. US")]
Subdivision = Annotated[str, Meta(min_length=1, max_length=10, description="Subdivision code, e.g. CA")]
Weekly = Annotated[list["WeeklyIn"], Meta(max_length=bh.MAX_WEEKLY_INTERVALS)]
Exceptions = Annotated[list["ExceptionIn"], Meta(max_length=bh.MAX_EXCEPTIONS)]
Reason = Literal["weekly", "exception", "holiday", "closed"]


# A "type: ignore[arg-type]" below marks a field whose domain type is wider than the documented one: a status
# the domain keeps as a str where the schema lists its values, or a field that is None only before the row is stored.

class IntervalIn(Struct, forbid_unknown_fields=True):
    start: Start
    end: End


class WeeklyIn(Struct, forbid_unknown_fields=True):
    day: Day
    start: Start
    end: End


class ExceptionIn(Struct, forbid_unknown_fields=True):
    """``{date, closed: true}`` (closed all day) or ``{date, intervals: [...]}`` (open only then)."""

    date: Day_
    closed: bool | None = None
    intervals: Annotated[list[IntervalIn], Meta(max_length=bh.MAX_EXCEPTION_INTERVALS)] | None = None


class HolidaysIn(Struct, forbid_unknown_fields=True):
    country: Country
    subdivision: Subdivision | None = None


class ScheduleCreate(Struct, forbid_unknown_fields=True):
    name: Name
    timezone: TimeZone
    weekly: Weekly
    exceptions: Exceptions | None = None
    holidays: HolidaysIn | None = None


class ScheduleUpdate(Struct, forbid_unknown_fields=True):
    """A JSON merge patch: lists are replaced whole; ``exceptions: null`` removes them all, ``holidays: null``
    stops following public holidays."""

    name: Name | UnsetType = UNSET
    timezone: TimeZone | UnsetType = UNSET
    weekly: Weekly | UnsetType = UNSET
    exceptions: Exceptions | UnsetType | None = UNSET
    holidays: HolidaysIn | UnsetType | None = UNSET


class IntervalOut(Struct):
    start: str
    end: str

    @classmethod
    def of(cls, interval: Interval) -> IntervalOut:
        return cls(**bh.interval_document(interval))


class WeeklyOut(Struct):
    day: int
    start: str
    end: str

    @classmethod
    def of(cls, weekly: WeeklyInterval) -> WeeklyOut:
        return cls(weekly.day, **bh.interval_document(weekly.interval))


class ExceptionOut(Struct):
    date: str
    closed: bool
    intervals: list[IntervalOut]
    """Empty when closed."""

    @classmethod
    def of(cls, exception: ScheduleException) -> ExceptionOut:
        return cls(exception.date.isoformat(), exception.closed, [IntervalOut.of(i) for i in exception.intervals])


class HolidaysOut(Struct):
    country: str
    subdivision: str | None

    @classmethod
    def of(cls, region: HolidayRegion | None) -> HolidaysOut | None:
        return None if region is None else cls(region.country, region.subdivision)


class ScheduleOut(Struct):
    id: int
    name: str
    timezone: str
    weekly: list[WeeklyOut]
    exceptions: list[ExceptionOut]
    holidays: HolidaysOut | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, s: Schedule) -> ScheduleOut:
        return cls(
            id=persisted(s.id), name=s.name, timezone=s.timezone, weekly=[WeeklyOut.of(w) for w in s.weekly],
            exceptions=[ExceptionOut.of(e) for e in s.exceptions], holidays=HolidaysOut.of(s.holidays),
            created_at=s.created_at,  # type: ignore[arg-type]  # the domain's type is wider
            updated_at=s.updated_at,  # type: ignore[arg-type]  # the domain's type is wider
        )


class StatusOut(Struct):
    schedule_id: int
    at: str
    """The instant asked about, with the offset of ``timezone``."""
    timezone: str
    """The zone whose wall clock the hours were read in."""
    open: bool
    reason: Reason
    next_open_at: str | None
    next_close_at: str | None


class OpeningOut(Struct):
    start: str
    end: str


class PreviewOut(Struct):
    schedule_id: int
    timezone: str
    start: str
    end: str
    intervals: list[OpeningOut]

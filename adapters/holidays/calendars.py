"""``HolidayCalendars`` over the ``holidays`` package (the Open World Holidays Framework): public holidays
of a country or one of its subdivisions, computed locally (no network). One calendar per region is kept for
the process; it computes the years it is asked about on first use."""

from __future__ import annotations

from functools import cache

import holidays

from domain.business_hours import HolidayRegion, IsHoliday
from domain.errors import ValidationFailed


@cache
def _supported() -> dict[str, frozenset[str]]:
    return {country: frozenset(subdivisions) for country, subdivisions in holidays.list_supported_countries().items()}


@cache
def _calendar(country: str, subdivision: str | None) -> holidays.HolidayBase:
    return holidays.country_holidays(country, subdiv=subdivision)


class PythonHolidayCalendars:
    def check(self, region: HolidayRegion) -> None:
        subdivisions = _supported().get(region.country)
        if subdivisions is None:
            raise ValidationFailed.field("holidays.country", "is not a country with a known holiday calendar")
        if region.subdivision is not None and region.subdivision not in subdivisions:
            known = ", ".join(sorted(subdivisions)[:60]) or "none"
            raise ValidationFailed.field("holidays.subdivision", f"is not a subdivision of {region.country} "
                                                                 f"(known: {known})")

    def is_holiday(self, region: HolidayRegion) -> IsHoliday:
        calendar = _calendar(region.country, region.subdivision)
        return calendar.__contains__

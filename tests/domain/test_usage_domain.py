from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from domain.errors import ValidationFailed
from domain.usage import (
    billable_seconds,
    crossed_thresholds,
    period_bounds,
    period_of,
    previous_period,
    resolve_period,
)


def test_periods_are_utc_calendar_months() -> None:
    late = datetime(2026, 1, 31, 23, 30, tzinfo=timezone(timedelta(hours=-5)))  # 1 February in UTC
    assert period_of(late) == "2026-02"
    assert period_bounds("2026-12") == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert previous_period("2026-01") == "2025-12" and previous_period("2026-03") == "2026-02"
    now = datetime(2026, 1, 5, tzinfo=UTC)
    assert [resolve_period(v, now) for v in (None, "current", "previous", "2024-07")] == [
        "2026-01", "2026-01", "2025-12", "2024-07"]
    for bad in ("2026-00", "2026-13", "26-01", "january"):
        with pytest.raises(ValidationFailed) as raised:
            resolve_period(bad, now)
        assert "period" in raised.value.details["validation_errors"]


def test_seconds_round_up_and_thresholds_fire_when_reached() -> None:
    assert [billable_seconds(x) for x in (0, 0.2, 60, 61.01)] == [0, 1, 60, 62]
    assert crossed_thresholds(0, 399, 500) == [] and crossed_thresholds(399, 400, 500) == [80]
    assert crossed_thresholds(400, 499, 500) == [] and crossed_thresholds(0, 600, 500) == [80, 100]
    assert crossed_thresholds(500, 501, 500) == [] and crossed_thresholds(0, 10, None) == []

"""Usage metering and quotas: metrics, billing periods (UTC calendar months), plan allowances, thresholds.

The ledger counts in its own units: ``call_seconds`` (whole seconds, rounded up, per call), ``calls`` and
``sms_segments``. Plans include call *minutes*; a quota on ``call_minutes`` is kept as seconds (minutes x 60).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from domain.errors import ValidationFailed

CALL_SECONDS = "call_seconds"
CALLS = "calls"
SMS_SEGMENTS = "sms_segments"
METRICS = (CALL_SECONDS, CALLS, SMS_SEGMENTS)

INCLUDED: dict[str, dict[str, int]] = {
    # metric → included amount per period, in the ledger's unit (call minutes x 60)
    "starter": {CALL_SECONDS: 100 * 60, SMS_SEGMENTS: 500},
    "business": {CALL_SECONDS: 2_000 * 60, SMS_SEGMENTS: 10_000},
    "enterprise": {CALL_SECONDS: 20_000 * 60, SMS_SEGMENTS: 100_000},
}
HARD_STOP_PLANS = frozenset({"starter"})
"""Plans without overage: past the included amount, new calls, dials and SMS are refused (quota_exceeded)."""
THRESHOLDS = (80, 100)
"""usage.threshold fires once per period, metric and threshold when ``used`` reaches this percent."""
PUBLIC_METRIC = {CALL_SECONDS: "call_minutes", CALLS: "calls", SMS_SEGMENTS: "sms_segments"}
"""The name clients see (quotas speak of call minutes)."""
SERIES_METRICS = {"call_minutes": CALL_SECONDS, "calls": CALLS, "sms_segments": SMS_SEGMENTS}
MAX_SERIES_DAYS = 366

_PERIOD = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
FIRST_YEAR, LAST_YEAR = 1970, 9998
"""The years a usage question may name (a period, a series' days): every bound of the answer, the instant after the
last day included, is a date the calendar can hold."""


def billable_seconds(duration_seconds: float) -> int:
    """Whole seconds, rounded up (a call of 61.2 s bills 62)."""
    return max(0, math.ceil(duration_seconds))


def period_of(at: datetime) -> str:
    """The billing period (UTC calendar month) holding ``at``: ``YYYY-MM``."""
    at = at.astimezone(UTC)
    return f"{at.year:04d}-{at.month:02d}"


def period_bounds(period: str) -> tuple[datetime, datetime]:
    year, month = int(period[:4]), int(period[5:7])
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def previous_period(period: str) -> str:
    year, month = int(period[:4]), int(period[5:7])
    return f"{year - (month == 1):04d}-{(month - 2) % 12 + 1:02d}"


def resolve_period(value: str | None, now: datetime) -> str:
    """``current`` (default), ``previous`` or ``YYYY-MM`` (400 naming ``period`` otherwise)."""
    current = period_of(now)
    if value in (None, "", "current"):
        return current
    if value == "previous":
        return previous_period(current)
    if not isinstance(value, str) or not _PERIOD.match(value):
        raise ValidationFailed.field("period", "must be current, previous or a month as YYYY-MM")
    if not FIRST_YEAR <= int(value[:4]) <= LAST_YEAR:
        raise ValidationFailed.field("period", f"must be a month from {FIRST_YEAR}-01 to {LAST_YEAR}-12")
    return value


def check_usage_day(day: date, field: str) -> date:
    """A day of a usage series: within ``FIRST_YEAR`` .. ``LAST_YEAR`` (400 naming ``field``)."""
    if not FIRST_YEAR <= day.year <= LAST_YEAR:
        raise ValidationFailed.field(field, f"must be a date from {FIRST_YEAR}-01-01 to {LAST_YEAR}-12-31")
    return day


def included(plan: str, metric: str) -> int | None:
    return INCLUDED.get(plan, {}).get(metric)


def crossed_thresholds(before: float, after: float, allowance: int | None) -> list[int]:
    """The thresholds (percent of ``allowance``) that ``used`` moving from ``before`` to ``after`` reached."""
    if not allowance:
        return []
    return [p for p in THRESHOLDS if before * 100 < p * allowance <= after * 100]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    organization_id: int
    metric: str
    quantity: int
    period: str
    source_type: str
    source_id: str
    occurred_at: datetime
    agent_id: int | None = None
    """The agent of the call measured (None for messages, and for entries before migration 0450 not backfilled)."""
    campaign_id: int | None = None
    """The campaign that placed the call measured, if any."""

    @property
    def day(self) -> date:
        return self.occurred_at.astimezone(UTC).date()

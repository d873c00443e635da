"""DNC CSV parsing and call statistics."""

from __future__ import annotations

from datetime import UTC, datetime

from domain.dnc import parse_csv
from domain.telephony import StatusCounts, call_stats


def test_csv_with_a_header_picks_the_phone_and_reason_columns() -> None:
    rows, problems = parse_csv("name,Phone_Number,reason\nAda,+14155550100,asked\nBob,,\n\n,+14155550101,\n")
    assert [(r.line, r.phone_number, r.reason) for r in rows] == [(2, "+14155550100", "asked"),
                                                                   (5, "+14155550101", None)]
    assert [(p.line, p.error) for p in problems] == [(3, "no phone number in this row")]


def test_csv_without_a_header_uses_the_first_two_columns() -> None:
    rows, problems = parse_csv("\ufeff+14155550100,opted out\n+14155550101\n")
    assert [(r.phone_number, r.reason) for r in rows] == [("+14155550100", "opted out"), ("+14155550101", None)]
    assert problems == []


def test_stats_answer_rate_and_average() -> None:
    start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
    stats = call_stats(start, end, StatusCounts({"completed": 3, "busy": 1, "queued": 1}, 4, 3, 90, 90))
    assert stats.total_calls == 5 and stats.answer_rate == 0.75 and stats.average_duration_seconds == 30
    assert stats.total_minutes == 1.5
    empty = call_stats(start, end, StatusCounts({}, 0, 0, 0, 0))
    assert empty.answer_rate is None and empty.average_duration_seconds is None and empty.total_calls == 0

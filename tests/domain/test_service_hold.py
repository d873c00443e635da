"""The billing hold on new work: past_due keeps full service for 7 days after it began, then holds it; canceled
(set only when its period closed) always holds; active never does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.billing import PAST_DUE_GRACE, service_hold

SINCE = datetime(2026, 2, 1, 0, 0, 5, tzinfo=UTC)


def test_past_due_holds_only_after_seven_days() -> None:
    assert timedelta(days=7) == PAST_DUE_GRACE
    assert service_hold("past_due", SINCE, SINCE) is None
    assert service_hold("past_due", SINCE, SINCE + timedelta(days=7)) is None
    hold = service_hold("past_due", SINCE, SINCE + timedelta(days=7, microseconds=1))
    assert hold is not None and hold.reason == "past_due" and hold.since == SINCE
    assert "since 2026-02-01" in hold.message and "Pay the open invoice" in hold.message


def test_past_due_since_an_unknown_instant_holds_at_once() -> None:
    hold = service_hold("past_due", None, SINCE)
    assert hold is not None and hold.reason == "past_due" and "since" not in hold.message.split(",")[0]


def test_canceled_always_holds_and_active_never() -> None:
    hold = service_hold("canceled", None, SINCE)
    assert hold is not None and hold.reason == "canceled" and "Reactivate" in hold.message
    assert service_hold("active", None, SINCE) is None
    assert service_hold("active", SINCE - timedelta(days=30), SINCE) is None

"""The cloud status's rules: the overall status is the worst component's; an age is degraded, then down."""

from __future__ import annotations

from domain.cloud import ComponentStatus, by_age, worst

OK, DEGRADED, DOWN = ComponentStatus.OPERATIONAL, ComponentStatus.DEGRADED, ComponentStatus.DOWN


def test_the_overall_status_is_the_worst() -> None:
    assert worst([]) is OK
    assert worst([OK, OK]) is OK
    assert worst([OK, DEGRADED, OK]) is DEGRADED
    assert worst([DEGRADED, DOWN, OK]) is DOWN


def test_an_age_is_degraded_past_its_first_threshold_and_down_past_its_second() -> None:
    assert by_age(None, 60, 300) is DOWN  # never seen
    assert by_age(0, 60, 300) is OK
    assert by_age(60, 60, 300) is OK  # at the threshold, not past it
    assert by_age(60.001, 60, 300) is DEGRADED
    assert by_age(300, 60, 300) is DEGRADED
    assert by_age(300.5, 60, 300) is DOWN
    assert by_age(10_000, 60, None) is DEGRADED  # no down threshold

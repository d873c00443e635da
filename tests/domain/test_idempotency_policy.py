from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain import idempotency as p
from domain.errors import ValidationFailed

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def record(*, age: timedelta = timedelta(0), fingerprint: str = "f", done: bool = False,
           lock_age: timedelta | None = timedelta(0)) -> p.IdempotencyRecord:
    response = p.StoredResponse(201, (), b"{}") if done else None
    locked = None if done or lock_age is None else NOW - lock_age
    return p.IdempotencyRecord(1, 1, "k", fingerprint, NOW - age, locked, "t", response)


def test_new_key_proceeds() -> None:
    assert p.decide(None, "f", NOW) is p.Decision.PROCEED


def test_completed_same_request_replays() -> None:
    assert p.decide(record(done=True), "f", NOW) is p.Decision.REPLAY


def test_other_request_is_a_mismatch() -> None:
    assert p.decide(record(done=True), "g", NOW) is p.Decision.MISMATCH
    assert p.decide(record(), "g", NOW) is p.Decision.MISMATCH


def test_in_flight_until_stale() -> None:
    assert p.decide(record(lock_age=timedelta(seconds=59)), "f", NOW) is p.Decision.IN_FLIGHT
    assert p.decide(record(lock_age=timedelta(seconds=60)), "f", NOW) is p.Decision.TAKE_OVER


@given(st.timedeltas(min_value=timedelta(hours=24), max_value=timedelta(days=30)), st.booleans(), st.text(max_size=3))
def test_after_the_window_anything_runs_anew(age: timedelta, done: bool, fingerprint: str) -> None:
    assert p.decide(record(age=age, done=done), fingerprint, NOW) is p.Decision.TAKE_OVER


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(hours=23, minutes=59)))
def test_within_the_window_a_completed_request_never_runs_again(age: timedelta) -> None:
    assert p.decide(record(age=age, done=True), "f", NOW) is p.Decision.REPLAY


def test_key_parsing() -> None:
    assert p.parse_key('"abc"') == "abc"
    assert p.parse_key("a" * 255) == "a" * 255
    for bad in ["", "a" * 256, '""', "caf\u00e9", "tab\there"]:
        with pytest.raises(ValidationFailed):
            p.parse_key(bad)


def test_fingerprint_depends_on_method_path_and_body() -> None:
    base = p.fingerprint("POST", "/api/v2/agents", b"{}")
    assert base != p.fingerprint("POST", "/api/v2/agents", b"{ }")
    assert base != p.fingerprint("POST", "/api/v2/calls", b"{}")
    assert base == p.fingerprint("post", "/api/v2/agents", b"{}")


@pytest.mark.parametrize(("status", "stored"), [(200, True), (201, True), (404, True), (409, True), (422, True),
                                                 (400, False), (401, False), (403, False), (429, False),
                                                 (500, False), (503, False)])
def test_which_responses_are_stored(status: int, stored: bool) -> None:
    assert p.is_replayable(status) is stored

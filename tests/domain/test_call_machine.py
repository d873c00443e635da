"""The call status machine, its events, outcomes and placeholder values (hypothesis where it is a machine)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from domain.calls import (
    CALL_MACHINE,
    FINAL_STATUSES,
    STATUSES,
    Call,
    events_for,
    outcome_of,
    render_values,
    simulator_scenario,
    spoken_time,
)
from domain.errors import InvalidTransition
from tests.properties import examples

T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)
TRIGGERS = sorted({trigger for _, trigger in CALL_MACHINE.moves})


def new_call() -> Call:
    return Call("c-1", 1, 7, "+14155550100", "+1555010099", created_at=T0, updated_at=T0)


def test_every_status_is_reachable_and_final_states_are_absorbing() -> None:
    assert CALL_MACHINE.states() == set(STATUSES)
    for (src, _), _dst in CALL_MACHINE.moves.items():
        assert src not in FINAL_STATUSES


def test_events_of_a_completed_call_come_in_call_order() -> None:
    call = new_call()
    seen: list[str] = []
    for trigger in ("dial", "answer", "complete"):
        call, events = call.move(trigger, T0)
        seen += events
    assert seen == ["call.started", "call.answered", "call.ended", "call.completed"]
    assert call.status == "completed" and call.ended_at == T0 and call.next_check_at is None


def test_a_transfer_is_announced_before_the_leg_ends() -> None:
    assert events_for("transfer", "transferred") == ["call.transferred", "call.ended"]
    assert events_for("busy", "busy") == ["call.ended", "call.failed"]
    assert events_for("cancel", "cancelled") == ["call.ended"]
    assert events_for("time_out", "failed") == ["call.ended", "call.failed"]


def test_cancel_is_allowed_only_while_queued_or_ringing() -> None:
    queued = new_call()
    cancelled, events = queued.cancel(T0)
    assert cancelled.status == "cancelled" and events == ["call.ended"] and cancelled.duration_seconds == 0
    in_progress = new_call().move("dial", T0)[0].move("answer", T0)[0]
    with pytest.raises(InvalidTransition):
        in_progress.cancel(T0)


def test_view_is_the_api_record() -> None:
    view = new_call().view()
    assert view["bot_id"] == "7" and view["status"] == "queued" and view["created_at"] == "2026-01-05T09:00:00Z"
    assert view["call_log_id"] is None and view["direction"] == "outbound"


@pytest.mark.parametrize(("number", "scenario"), [
    ("+1555010000", "complete"), ("+1555010001", "busy"), ("+1555010002", "no_answer"), ("+1555010003", "failed"),
    ("+1555010004", "voicemail"), ("+1555010005", "transfer"), ("+1555010006", "book"), ("+1555010042", "complete"),
    ("+14155550100", "complete"),
])
def test_simulator_test_numbers(number: str, scenario: str) -> None:
    assert simulator_scenario(number) == scenario


def test_outcomes() -> None:
    assert outcome_of("completed", "hangup", booked=True) == "appointment_booked"
    assert outcome_of("completed", "hangup") == "conversation_completed"
    assert outcome_of("voicemail", "voicemail_message_left", message_left=True) == "voicemail_left"
    assert outcome_of("failed", "timeout") == "timeout"
    assert outcome_of("busy", "busy") == "busy"


def test_builtin_placeholders_win_over_custom_data() -> None:
    values = render_values("Ada", "+14155550100", {"contact_name": "Bob", "destination_phone": "x", "city": "Oslo",
                                                   "none": None})
    assert values == {"contact_name": "Ada", "destination_phone": "+14155550100", "city": "Oslo"}
    assert render_values(None, "+1", {"contact_name": "Bob"})["contact_name"] == "Bob"


@given(st.lists(st.sampled_from(TRIGGERS), max_size=12))
def test_random_trigger_sequences_never_leave_a_final_state(triggers: list[str]) -> None:
    call = new_call()
    for trigger in triggers:
        before = call.status
        if CALL_MACHINE.can(before, trigger):
            call, _ = call.move(trigger, T0)
        else:
            with pytest.raises(InvalidTransition):
                call.move(trigger, T0)
            assert call.status == before


class CallLifecycle(RuleBasedStateMachine):
    """Any legal path: events keep the order of a real call and call.ended is emitted exactly once."""

    def __init__(self) -> None:
        super().__init__()
        self.call = new_call()
        self.events: list[str] = []
        self.at = T0

    def _move(self, trigger: str) -> None:
        self.at += timedelta(seconds=1)
        if CALL_MACHINE.can(self.call.status, trigger):
            self.call, events = self.call.move(trigger, self.at)
            self.events += events
        else:
            with pytest.raises(InvalidTransition):
                self.call.move(trigger, self.at)

    @rule(trigger=st.sampled_from(TRIGGERS))
    def move(self, trigger: str) -> None:
        self._move(trigger)

    @precondition(lambda self: self.call.status in ("queued", "ringing"))
    @rule()
    def cancel(self) -> None:
        self.call, events = self.call.cancel(self.at)
        self.events += events

    @invariant()
    def ended_once_when_final(self) -> None:
        assert self.events.count("call.ended") == (1 if self.call.is_final else 0)

    @invariant()
    def order_of_a_real_call(self) -> None:
        order = {"call.started": 0, "call.answered": 1, "call.transferred": 2, "call.ended": 3,
                 "call.completed": 4, "call.failed": 4}
        ranks = [order[e] for e in self.events]
        assert ranks == sorted(ranks)
        assert self.events.count("call.started") <= 1 and self.events.count("call.answered") <= 1
        outcome = [e for e in self.events if e in ("call.completed", "call.failed", "call.transferred")]
        assert len(outcome) <= 1
        if "call.answered" in self.events:
            assert "call.started" in self.events

    @invariant()
    def timestamps_follow_the_status(self) -> None:
        c = self.call
        assert (c.started_at is not None) == ("call.started" in self.events)
        assert (c.answered_at is not None) == ("call.answered" in self.events)
        assert (c.ended_at is not None) == c.is_final
        if c.is_final:
            assert c.duration_seconds is not None


TestCallLifecycle = CallLifecycle.TestCase
TestCallLifecycle.settings = settings(max_examples=examples(200), stateful_step_count=12, deadline=None)


@pytest.mark.parametrize(("instant", "zone", "said"), [
    ("2026-03-03T13:30:00+00:00", "Europe/Berlin", "Tuesday, March 3 at 2:30 PM"),
    ("2026-03-03T11:00:00+00:00", "Europe/Berlin", "Tuesday, March 3 at 12:00 PM"),
    ("2026-03-03T04:05:00+00:00", "America/New_York", "Monday, March 2 at 11:05 PM"),  # the day before, locally
    ("2026-07-01T04:00:00+00:00", "America/New_York", "Wednesday, July 1 at 12:00 AM"),  # daylight saving time
    ("2026-03-03T13:30:00+00:00", None, "Tuesday, March 3 at 1:30 PM UTC"),
    ("2026-03-03T13:30:00+00:00", "Not/AZone", "Tuesday, March 3 at 1:30 PM UTC"),
])
def test_spoken_time_is_local_and_in_words(instant: str, zone: str | None, said: str) -> None:
    assert spoken_time(datetime.fromisoformat(instant), zone) == said

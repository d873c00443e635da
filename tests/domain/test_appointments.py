"""The appointment state machine: table, methods, sequence bumps, terminal states."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from domain.errors import InvalidTransition, ValidationFailed
from domain.scheduling.model import (
    APPOINTMENT_MACHINE,
    INITIAL,
    SLOT_HOLDING_STATUSES,
    STATUSES,
    TERMINAL_STATUSES,
    Appointment,
    Slot,
)
from tests.properties import examples

START = datetime(2026, 3, 9, 13, tzinfo=UTC)
SLOT = Slot(START, START + timedelta(minutes=30))

# trigger -> the Appointment method performing it
ACTIONS = {
    "approve": lambda a, now: a.approve(now),
    "decline": lambda a, now: a.decline(now),
    "cancel": lambda a, now: a.cancel(now),
    "reschedule": lambda a, now: a.mark_rescheduled(now),
    "complete": lambda a, now: a.record_outcome("completed", now),
    "no_show": lambda a, now: a.record_outcome("no_show", now),
}
EXPECTED_REASON = {"decline": "declined", "cancel": "cancelled", "reschedule": "rescheduled"}


def new(require_approval: bool = False) -> Appointment:
    return Appointment.new(organization_id=1, calendar_id=2, slot=SLOT, require_approval=require_approval,
                           attendee_name="Ann", now=START - timedelta(days=1), id=10)


def test_table_matches_the_documented_lifecycle() -> None:
    assert APPOINTMENT_MACHINE.states() == {INITIAL, *STATUSES}
    assert frozenset({"pending", "confirmed"}) == SLOT_HOLDING_STATUSES
    expected = {
        (INITIAL, "book"): "confirmed", (INITIAL, "request"): "pending",
        ("pending", "approve"): "confirmed", ("pending", "decline"): "cancelled",
        ("pending", "cancel"): "cancelled", ("confirmed", "cancel"): "cancelled",
        ("pending", "reschedule"): "cancelled", ("confirmed", "reschedule"): "cancelled",
        ("confirmed", "complete"): "completed", ("confirmed", "no_show"): "no_show",
    }
    assert dict(APPOINTMENT_MACHINE.moves) == expected
    for status in TERMINAL_STATUSES:
        assert not any(src == status for src, _ in APPOINTMENT_MACHINE.moves)


def test_new_appointments() -> None:
    booked, requested = new(), new(require_approval=True)
    assert (booked.status, requested.status) == ("confirmed", "pending")
    assert booked.sequence == requested.sequence == 0
    assert booked.slot_start == SLOT.start and booked.slot_end == SLOT.end
    assert booked.holds_slot and requested.holds_slot and booked.cancel_reason is None


def test_cancel_reasons_and_outcome() -> None:
    now = START
    assert new(True).decline(now).cancel_reason == "declined"
    assert new(True).cancel(now).cancel_reason == "cancelled"
    assert new().cancel(now).cancel_reason == "cancelled"
    moved = new().mark_rescheduled(now)
    assert (moved.status, moved.cancel_reason, moved.sequence, moved.updated_at) == ("cancelled", "rescheduled", 1, now)
    done = new().record_outcome("no_show", now, notes="did not pick up")
    assert (done.status, done.notes, done.sequence) == ("no_show", "did not pick up", 1)
    with pytest.raises(ValidationFailed) as caught:
        new().record_outcome("cancelled")
    assert "outcome" in caught.value.details["validation_errors"]
    with pytest.raises(InvalidTransition) as refused:
        new(True).record_outcome("completed")
    assert refused.value.current == "pending" and refused.value.code == "invalid_transition"


def test_replacement_of_a_reschedule() -> None:
    later = Slot(START + timedelta(days=1), START + timedelta(days=1, minutes=30))
    for original in (new(), new(True)):
        copy = original.replacement(later, now=START, id=None)
        assert copy.status == original.status  # a pending request stays pending
        assert (copy.slot_start, copy.slot_end, copy.rescheduled_from, copy.sequence) == (later.start, later.end, 10, 0)
        assert copy.attendee_name == "Ann" and copy.cancel_reason is None and copy.id is None
    with pytest.raises(InvalidTransition):
        new().cancel().replacement(later)


class AppointmentMachine(RuleBasedStateMachine):
    """Drive an appointment through random triggers; compare with the transition table."""

    def __init__(self) -> None:
        super().__init__()
        self.appointment: Appointment | None = None
        self.status = INITIAL
        self.clock = START

    @initialize(require_approval=st.booleans())
    def create(self, require_approval: bool) -> None:
        trigger = "request" if require_approval else "book"
        self.appointment = new(require_approval)
        self.status = APPOINTMENT_MACHINE.next(INITIAL, trigger)
        assert self.appointment.status == self.status

    @precondition(lambda self: self.appointment is not None)
    @rule(trigger=st.sampled_from(sorted(ACTIONS)))
    def fire(self, trigger: str) -> None:
        before = self.appointment
        assert before is not None
        self.clock += timedelta(minutes=1)
        if APPOINTMENT_MACHINE.can(before.status, trigger):
            after = ACTIONS[trigger](before, self.clock)
            assert after.status == APPOINTMENT_MACHINE.next(before.status, trigger)
            assert after.sequence > before.sequence
            assert after.updated_at == self.clock
            assert (after.id, after.slot_start, after.slot_end) == (before.id, before.slot_start, before.slot_end)
            if trigger in EXPECTED_REASON:
                assert after.cancel_reason == EXPECTED_REASON[trigger]
            self.appointment, self.status = after, after.status
        else:
            with pytest.raises(InvalidTransition) as caught:
                ACTIONS[trigger](before, self.clock)
            assert caught.value.current == before.status
            assert self.appointment == before  # frozen: nothing changed

    @invariant()
    def consistent(self) -> None:
        if self.appointment is None:
            return
        appt = self.appointment
        assert appt.status == self.status and appt.status in STATUSES
        assert (appt.cancel_reason is not None) == (appt.status == "cancelled")
        assert appt.holds_slot == (appt.status in SLOT_HOLDING_STATUSES)
        if appt.status in TERMINAL_STATUSES:
            assert appt.is_terminal
            assert not any(appt.can(trigger) for trigger in ACTIONS)


AppointmentMachine.TestCase.settings = settings(max_examples=examples(60), stateful_step_count=12, deadline=None)
TestAppointmentMachine = AppointmentMachine.TestCase

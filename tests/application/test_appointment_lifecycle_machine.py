"""The appointment use cases against a model (hypothesis RuleBasedStateMachine, in-memory backend):
every move follows the transition table, illegal ones raise InvalidTransition and change nothing, an outcome
is refused before the appointment has started, a slot is never held twice, and exactly the catalogued events
are recorded. Time passes too (a rule moves the clock), so outcomes are recorded once slots have started."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from adapters.memory.clock import ManualClock
from adapters.memory.store import InMemoryStore
from application.accounts import CreateOrganization, CreateOrganizationCommand
from application.context import Actor
from application.ports.platform import UnitOfWork
from application.scheduling.booking import (
    AppointmentRef,
    ApproveAppointment,
    BookAppointment,
    BookAppointmentCommand,
    CancelAppointment,
    DeclineAppointment,
    GetAppointment,
    RecordAppointmentOutcome,
    RecordAppointmentOutcomeCommand,
    RescheduleAppointment,
    RescheduleAppointmentCommand,
)
from application.scheduling.calendars import (
    AddAvailabilityRule,
    AddAvailabilityRuleCommand,
    CreateCalendar,
    CreateCalendarCommand,
)
from domain.errors import InvalidTransition, SlotUnavailable
from domain.scheduling.model import APPOINTMENT_MACHINE, BUSY_STATUSES, SLOT_HOLDING_STATUSES
from entrypoints.ioc import build_container
from entrypoints.overrides import ClockProvider
from entrypoints.settings import Settings
from tests.properties import examples

NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)
SLOTS = [datetime(2026, 3, 3, 14, tzinfo=UTC) + timedelta(minutes=30 * i) for i in range(3)]  # 09:00-10:30 EST
MOVE_TRIGGER = {"approve": "approve", "decline": "decline", "cancel": "cancel", "completed": "complete",
                "no_show": "no_show"}
MOVE_EVENT = {"approve": "appointment.booked", "decline": "appointment.cancelled", "cancel": "appointment.cancelled"}


class AppointmentLifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock(NOW)
        self.container = build_container(Settings(database_url="memory://", secret_key="k"),
                                         ClockProvider(self.clock))
        self.model: dict[int, tuple[str, datetime]] = {}  # id -> (status, slot_start)
        self.events: list[str] = []

    def teardown(self) -> None:
        self.loop.run_until_complete(self.container.close())
        self.loop.close()

    def run(self, case: type, *args: Any) -> Any:
        async def go() -> Any:
            async with self.container() as r:
                try:
                    result = await (await r.get(case)).execute(*args)
                except Exception:
                    await (await r.get(UnitOfWork)).rollback()
                    raise
                await (await r.get(UnitOfWork)).commit()
                return result

        return self.loop.run_until_complete(go())

    def holder(self, slot: datetime, ignoring: int | None = None) -> int | None:
        """The appointment whose time the slot is (busy: any status but cancelled, an outcome included)."""
        for appointment_id, (status, start) in self.model.items():
            if start == slot and status in BUSY_STATUSES and appointment_id != ignoring:
                return appointment_id
        return None

    @initialize()
    def calendar(self) -> None:
        async def organization() -> int:
            async with self.container() as r:
                org = await (await r.get(CreateOrganization)).execute(CreateOrganizationCommand("O", "enterprise",
                                                                                                "standard"))
                await (await r.get(UnitOfWork)).commit()
            return org.id or 0

        self.actor = Actor.system(self.loop.run_until_complete(organization()))
        self.calendar_id = self.run(CreateCalendar, CreateCalendarCommand(
            self.actor, name="C", timezone="America/New_York")).id
        self.run(AddAvailabilityRule, AddAvailabilityRuleCommand(self.actor, self.calendar_id, 1, "09:00",
                                                                       "10:30"))

    def pick(self, index: int) -> int | None:
        return sorted(self.model)[index % len(self.model)] if self.model else None

    @rule(slot=st.sampled_from(SLOTS), require_approval=st.booleans())
    def book(self, slot: datetime, require_approval: bool) -> None:
        command = BookAppointmentCommand(self.actor, self.calendar_id, slot, require_approval=require_approval)
        if self.holder(slot) is not None or slot < self.clock.now():
            try:
                self.run(BookAppointment, command)
            except SlotUnavailable:
                return
            raise AssertionError("a held slot was booked again")
        booked = self.run(BookAppointment, command)
        assert booked.status == ("pending" if require_approval else "confirmed")
        self.model[booked.id] = (booked.status, slot)
        if not require_approval:
            self.events.append("appointment.booked")

    @rule(index=st.integers(0, 20), move=st.sampled_from(sorted(MOVE_TRIGGER)))
    def move(self, index: int, move: str) -> None:
        appointment_id = self.pick(index)
        if appointment_id is None:
            return
        status, slot = self.model[appointment_id]
        if move in ("completed", "no_show"):
            case, args = RecordAppointmentOutcome, (RecordAppointmentOutcomeCommand(self.actor, appointment_id, move),)
        else:
            case = {"approve": ApproveAppointment, "decline": DeclineAppointment,
                    "cancel": CancelAppointment}[move]
            args = (AppointmentRef(self.actor, appointment_id),)
        trigger = MOVE_TRIGGER[move]
        too_early = move in ("completed", "no_show") and self.clock.now() < slot
        if not APPOINTMENT_MACHINE.can(status, trigger) or too_early:
            try:
                self.run(case, *args)
            except InvalidTransition as error:
                assert error.current == status
                return
            raise AssertionError(f"{move} from {status} was allowed")
        moved = self.run(case, *args)
        assert moved.status == APPOINTMENT_MACHINE.next(status, trigger)
        self.model[appointment_id] = (moved.status, slot)
        if move in MOVE_EVENT:
            self.events.append(MOVE_EVENT[move])

    @rule(index=st.integers(0, 20), slot=st.sampled_from(SLOTS))
    def reschedule(self, index: int, slot: datetime) -> None:
        appointment_id = self.pick(index)
        if appointment_id is None:
            return
        status, _ = self.model[appointment_id]
        command = RescheduleAppointmentCommand(self.actor, appointment_id, slot)
        if not APPOINTMENT_MACHINE.can(status, "reschedule"):
            try:
                self.run(RescheduleAppointment, command)
            except InvalidTransition:
                return
            raise AssertionError(f"reschedule from {status} was allowed")
        if self.holder(slot, ignoring=appointment_id) is not None or slot < self.clock.now():
            try:
                self.run(RescheduleAppointment, command)
            except SlotUnavailable:
                return
            raise AssertionError("rescheduled into a held slot")
        result = self.run(RescheduleAppointment, command)
        assert result.previous.id == appointment_id and result.appointment.rescheduled_from == appointment_id
        assert result.appointment.status == status and result.previous.cancel_reason == "rescheduled"
        self.model[appointment_id] = ("cancelled", self.model[appointment_id][1])
        self.model[result.appointment.id] = (status, slot)
        self.events.append("appointment.rescheduled")

    @rule(minutes=st.sampled_from([30, 60, 26 * 60]))  # 26 h: from NOW to the first slot's start
    def time_passes(self, minutes: int) -> None:
        if self.clock.now() < SLOTS[-1] + timedelta(hours=1):
            self.clock.advance(minutes=minutes)

    @invariant()
    def matches_the_model(self) -> None:
        if not self.model:
            return
        for appointment_id, (status, slot) in self.model.items():
            stored = self.run(GetAppointment, AppointmentRef(self.actor, appointment_id))
            assert (stored.status, stored.slot_start) == (status, slot)
        for slot in SLOTS:
            holders = [i for i, (s, start) in self.model.items() if start == slot and s in SLOT_HOLDING_STATUSES]
            assert len(holders) <= 1

    @invariant()
    def events_match(self) -> None:
        store = self.loop.run_until_complete(self.container.get(InMemoryStore))
        assert [event.type for _, event, _ in store.outbox] == self.events


AppointmentLifecycle.TestCase.settings = settings(max_examples=examples(50), stateful_step_count=30, deadline=None)
TestAppointmentLifecycle = AppointmentLifecycle.TestCase

"""Attendee notifications on the in-memory backend: the ``attendees`` consumer plans one notification per
appointment and kind (whatever how often it reads an event), one ICS thread per reschedule chain, and a delivery
that marks each notification once (an email sender that records what it is handed)."""

from __future__ import annotations

from datetime import UTC, datetime

from application.ports.scheduling import AttendeeNotificationRepository, IcsRenderer
from application.ports.triggers import EmailMessage
from application.scheduling.booking import (
    AppointmentRef,
    BookAppointment,
    BookAppointmentCommand,
    CancelAppointment,
    RescheduleAppointment,
    RescheduleAppointmentCommand,
)
from application.scheduling.calendars import (
    AddAvailabilityRule,
    AddAvailabilityRuleCommand,
    CreateCalendar,
    CreateCalendarCommand,
)
from application.scheduling.notifications import (
    AttendeeMail,
    DeliverAttendeeNotification,
    NotificationRef,
    PlanAttendeeNotifications,
    PlanAttendeeNotificationsCommand,
)
from domain.scheduling.notifications import NotificationKind, NotificationStatus
from entrypoints.units import ScopedUnits
from tests.application.conftest import App


class Outbox:
    def __init__(self) -> None:
        self.sent: list[EmailMessage] = []

    async def send(self, message: EmailMessage) -> None:
        self.sent.append(message)


async def test_a_reschedule_chain_is_one_thread_and_every_notification_goes_out_once(app: App) -> None:
    actor = await app.actor()
    calendar = await app.run(CreateCalendar, CreateCalendarCommand(actor, "Desk", "America/New_York",
                                                                   reminder_minutes=60))
    for weekday in range(7):
        await app.run(AddAvailabilityRule, AddAvailabilityRuleCommand(actor, calendar.id, weekday, "09:00", "17:00"))
    booked = await app.run(BookAppointment, BookAppointmentCommand(
        actor, calendar.id, datetime(2026, 3, 3, 15, tzinfo=UTC), attendee_email="ada@example.com"))
    moved = await app.run(RescheduleAppointment, RescheduleAppointmentCommand(
        actor, booked.id, datetime(2026, 3, 4, 15, tzinfo=UTC)))
    await app.run(CancelAppointment, AppointmentRef(actor, moved.appointment.id))
    assert await app.run(PlanAttendeeNotifications, PlanAttendeeNotificationsCommand()) >= 3
    assert await app.run(PlanAttendeeNotifications, PlanAttendeeNotificationsCommand()) == 0

    async with app.container() as r:
        repository = await r.get(AttendeeNotificationRepository)
        first = await repository.list_for_appointment(actor.organization_id, booked.id)
        second = await repository.list_for_appointment(actor.organization_id, moved.appointment.id)
    assert [(n.kind, n.status, n.thread_id, n.sequence) for n in first] == [
        (NotificationKind.CONFIRMATION, NotificationStatus.PENDING, booked.id, 0),
        (NotificationKind.REMINDER, NotificationStatus.SKIPPED, booked.id, 0)]
    assert [(n.kind, n.status, n.thread_id, n.sequence) for n in second] == [
        (NotificationKind.RESCHEDULE, NotificationStatus.PENDING, booked.id, 1),
        (NotificationKind.REMINDER, NotificationStatus.SKIPPED, booked.id, 0),
        (NotificationKind.CANCELLATION, NotificationStatus.PENDING, booked.id, 2)]

    mail = Outbox()
    deliver = DeliverAttendeeNotification(ScopedUnits(app.container), mail, await app.container.get(IcsRenderer),
                                          AttendeeMail("desk@example.com"), app.clock)
    for notification in [*first, *second] * 2:  # every job twice
        await deliver.execute(NotificationRef(actor.organization_id, notification.id))
    assert [m.subject.split(":")[0] for m in mail.sent] == ["Confirmed", "Rescheduled", "Cancelled"]
    assert [m.attachments[0].content_type for m in mail.sent] == [
        "text/calendar; method=REQUEST", "text/calendar; method=REQUEST", "text/calendar; method=CANCEL"]
    assert all(f"UID:appointment-{booked.id}@parley" in m.attachments[0].data.decode() for m in mail.sent)

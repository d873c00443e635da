"""Attendee notifications (``application/scheduling/notifications.py``): confirmation, reschedule and cancellation
emails with an ICS invitation, and reminders by email or SMS, for the scheduling feature's appointments.

Email goes out through the ``EmailSender`` of the triggers feature (SMTP, ``PARLEY_SMTP_URL``; the invitations'
ORGANIZER is ``PARLEY_SMTP_SENDER``'s address) and SMS through the sms feature's ``SendSms``: both features are
installed before this one.

Jobs: ``attendees.plan`` (the outbox's ``attendees`` consumer: recurring, woken by any commit that recorded
events) and ``attendees.notify`` (one per notification, key its id, due when it should go out).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import parseaddr

from dishka import AsyncContainer, Provider, Scope, provide, provide_all

from adapters.memory.scheduling import InMemoryAttendeeNotificationRepository
from adapters.sql.attendee_notifications import SqlAttendeeNotificationRepository
from application.jobs import JobKind
from application.outbox import ATTENDEES, consumer_job
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from application.ports.scheduling import AttendeeNotificationRepository, IcsRenderer
from application.ports.triggers import EmailSender
from application.scheduling import notifications as cases
from entrypoints.features import Feature
from entrypoints.features.triggers import TriggerSettings
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits

PLAN_KIND = "attendees.plan"
NOTIFY_KIND = cases.NOTIFY_JOB
BATCH = 500


class AttendeesProvider(Provider):
    scope = Scope.REQUEST

    use_cases = provide_all(
        cases.PlanAttendeeNotifications,
        cases.ReadAttendeeNotification,
        cases.MarkAttendeeNotification,
        cases.SendSmsReminder,
    )

    @provide(scope=Scope.APP)
    def mail(self, section: TriggerSettings) -> cases.AttendeeMail:
        return cases.AttendeeMail(organizer=parseaddr(section.sender)[1] or "parley@localhost")


class SqlAttendeesProvider(Provider):
    notifications = provide(SqlAttendeeNotificationRepository, provides=AttendeeNotificationRepository,
                            scope=Scope.REQUEST)


class MemoryAttendeesProvider(Provider):
    notifications = provide(InMemoryAttendeeNotificationRepository, provides=AttendeeNotificationRepository,
                            scope=Scope.REQUEST)


def plan_job(container: AsyncContainer, settings: Settings) -> JobKind:
    """The consumer as a recurring job (``application/outbox.consumer_job``)."""
    return consumer_job(PLAN_KIND, ScopedUnits(container), cases.PlanAttendeeNotifications,
                        cases.PlanAttendeeNotificationsCommand, BATCH)


async def deliverer(container: AsyncContainer) -> cases.DeliverAttendeeNotification:
    return cases.DeliverAttendeeNotification(
        ScopedUnits(container), await container.get(EmailSender), await container.get(IcsRenderer),
        await container.get(cases.AttendeeMail), await container.get(Clock))


async def notify(container: AsyncContainer, organization_id: int, notification_id: int) -> datetime | None:
    """One attempt at one notification; when it is due again (None: done)."""
    return await (await deliverer(container)).execute(cases.NotificationRef(organization_id, notification_id))


def notify_job(container: AsyncContainer, settings: Settings) -> JobKind:
    async def run(job: ClaimedJob) -> datetime | None:
        return await notify(container, int(job.payload["organization_id"]), int(job.payload["notification_id"]))

    return JobKind(NOTIFY_KIND, run, concurrency=4, lease=timedelta(seconds=60))


FEATURE = Feature(
    name="attendees",
    providers=(AttendeesProvider,),
    sql=SqlAttendeesProvider,
    memory=MemoryAttendeesProvider,
    jobs=[plan_job, notify_job],
    outbox_consumers={ATTENDEES: PLAN_KIND},
)

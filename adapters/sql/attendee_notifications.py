"""SQL repository of attendee notifications (``attendee_notifications``, migration 0420): one row per appointment
and kind, whose ``status`` is the durable mark that it was sent."""

from __future__ import annotations

import builtins
from typing import Any

import sqlalchemy as sa

from adapters.sql.dialect import insert
from adapters.sql.scheduling_tables import attendee_notifications as table
from adapters.sql.uow import SqlUnitOfWork
from domain.scheduling.notifications import AttendeeNotification, NotificationKind, NotificationStatus


def _row(row: Any) -> AttendeeNotification:
    return AttendeeNotification(
        id=row.id, organization_id=row.organization_id, appointment_id=row.appointment_id, thread_id=row.thread_id,
        kind=NotificationKind(row.kind), channel=row.channel, recipient=row.recipient, sequence=row.sequence,
        due_at=row.due_at, status=NotificationStatus(row.status), attempts=row.attempts, error=row.error,
        sent_at=row.sent_at, created_at=row.created_at)


class SqlAttendeeNotificationRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add_new(self, notification: AttendeeNotification) -> AttendeeNotification | None:
        conn = await self.uow.connection()
        values = {
            "organization_id": notification.organization_id, "appointment_id": notification.appointment_id,
            "thread_id": notification.thread_id, "kind": str(notification.kind), "channel": notification.channel,
            "recipient": notification.recipient, "sequence": notification.sequence, "due_at": notification.due_at,
            "status": str(notification.status), "attempts": notification.attempts, "error": notification.error,
            "sent_at": notification.sent_at, "created_at": notification.created_at,
        }
        statement = (insert(table, self.uow.dialect)
                     .on_conflict_do_nothing(index_elements=[table.c.appointment_id, table.c.kind])
                     .returning(*table.c))
        row = (await conn.execute(statement, values)).first()
        return _row(row) if row is not None else None

    async def get(self, organization_id: int, notification_id: int, *,
                  lock: bool = False) -> AttendeeNotification | None:
        conn = await self.uow.connection()
        query = sa.select(table).where(table.c.organization_id == organization_id, table.c.id == notification_id)
        if lock:
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return _row(row) if row is not None else None

    async def update(self, notification: AttendeeNotification) -> AttendeeNotification:
        conn = await self.uow.connection()
        await conn.execute(table.update().where(
            table.c.organization_id == notification.organization_id, table.c.id == notification.id,
        ).values(status=str(notification.status), attempts=notification.attempts, error=notification.error,
                 sent_at=notification.sent_at))
        return notification

    async def last_sequence(self, organization_id: int, thread_id: int) -> int | None:
        conn = await self.uow.connection()
        found = (await conn.execute(sa.select(sa.func.max(table.c.sequence)).where(
            table.c.organization_id == organization_id, table.c.thread_id == thread_id,
            table.c.kind != str(NotificationKind.REMINDER)))).scalar()
        return int(found) if found is not None else None

    async def find(self, organization_id: int, appointment_id: int,
                   kind: NotificationKind) -> AttendeeNotification | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(table).where(
            table.c.organization_id == organization_id, table.c.appointment_id == appointment_id,
            table.c.kind == str(kind)))).first()
        return _row(row) if row is not None else None

    async def list_for_appointment(self, organization_id: int,
                                   appointment_id: int) -> builtins.list[AttendeeNotification]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(table).where(
            table.c.organization_id == organization_id, table.c.appointment_id == appointment_id,
        ).order_by(table.c.id))
        return [_row(row) for row in rows]

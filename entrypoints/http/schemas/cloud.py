from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from msgspec import Meta, Struct

from application.cloud import CloudStatus

Status = Literal["operational", "degraded", "down"]


class DatabaseOut(Struct):
    status: Status
    latency_ms: Annotated[float | None, Meta(description="A measured round trip (null: it failed)")]


class WorkerOut(Struct):
    status: Status
    last_heartbeat_at: Annotated[datetime | None, Meta(description="The newest heartbeat of any worker process")]


class OutboxOut(Struct):
    status: Status
    pending: Annotated[int | None, Meta(description="Events some consumer has not processed yet")]
    oldest_pending_seconds: Annotated[float | None, Meta(description="Age of the oldest of them (0: none)")]


class TelephonyOut(Struct):
    status: Status
    provider: Annotated[str | None, Meta(description="The provider that answered the health check")]


class WebhooksOut(Struct):
    status: Status
    failing_subscriptions: Annotated[int | None, Meta(description=(
        "The organization's subscriptions whose deliveries fail without a success, or that were disabled"))]


class ComponentsOut(Struct):
    database: DatabaseOut
    worker: WorkerOut
    outbox: OutboxOut
    telephony: TelephonyOut
    webhooks: WebhooksOut


class CloudStatusOut(Struct):
    status: Annotated[Status, Meta(description="The worst of the components")]
    checked_at: datetime
    components: ComponentsOut

    @classmethod
    def of(cls, x: CloudStatus) -> CloudStatusOut:
        return cls(
            status=x.status.value,
            checked_at=x.checked_at,
            components=ComponentsOut(
                database=DatabaseOut(x.database.status.value, x.database.latency_ms),
                worker=WorkerOut(x.worker.status.value, x.worker.last_heartbeat_at),
                outbox=OutboxOut(x.outbox.status.value, x.outbox.pending,
                                 x.outbox.oldest_pending_seconds),
                telephony=TelephonyOut(x.telephony.status.value, x.telephony.provider),
                webhooks=WebhooksOut(x.webhooks.status.value,
                                     x.webhooks.failing_subscriptions),
            ),
        )

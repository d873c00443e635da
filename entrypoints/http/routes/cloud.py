from __future__ import annotations

from dishka import FromDishka

from application import cloud as uc
from application.context import Actor
from entrypoints.http.envelope import Envelope
from entrypoints.http.routing import AuthMode, endpoint
from entrypoints.http.schemas.cloud import CloudStatusOut

TAGS = ["Cloud status"]


@endpoint("GET", "/cloud/status", operation_id="getCloudStatus", tags=TAGS, scopes=("cloud:read",),
          auth=AuthMode.KEY_OR_SESSION,
          summary="Cloud-connectivity status: each component measured now, and the worst of them",
          description=("A Bearer key with cloud:read, or a dashboard session. Measured on every request: a "
                       "database round trip, the newest worker heartbeat, the outbox backlog, the telephony "
                       "provider's health check and the organization's failing webhook subscriptions. status is "
                       "operational, degraded or down, the worst component's."))
async def get_cloud_status(actor: FromDishka[Actor], use_case: FromDishka[uc.GetCloudStatus]
                           ) -> Envelope[CloudStatusOut]:
    return Envelope(CloudStatusOut.of(await use_case.execute(uc.GetCloudStatusCommand(actor))))


ROUTES = [get_cloud_status]

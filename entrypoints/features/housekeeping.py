"""Housekeeping job: purges expired idempotency records and ended rate-limit windows (every 10 minutes)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from dishka import Provider, Scope, provide_all

from application.housekeeping import PurgeExpired
from application.jobs import JobKind
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from entrypoints.settings import Settings

if TYPE_CHECKING:
    from entrypoints.worker import JobContext

log = logging.getLogger("parley.housekeeping")
INTERVAL = timedelta(minutes=10)
KIND = "housekeeping.purge"


class HousekeepingProvider(Provider):
    scope = Scope.REQUEST
    cases = provide_all(PurgeExpired)


def providers(settings: Settings) -> list[Provider]:
    return [HousekeepingProvider()]


def purge_job(context: JobContext) -> JobKind:
    async def purge(job: ClaimedJob) -> datetime:
        async with context.units() as unit:
            purged = await (await unit.get(PurgeExpired)).execute()
            now = (await unit.get(Clock)).now()
            await unit.commit()
        if purged.idempotency_records or purged.rate_limit_windows:
            log.info("purged %d idempotency records and %d rate-limit windows", purged.idempotency_records,
                     purged.rate_limit_windows)
        return now + INTERVAL

    return JobKind(KIND, purge, recurring=True)


ROUTES: list[object] = []
JOBS = [purge_job]

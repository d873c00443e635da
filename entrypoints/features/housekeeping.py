"""Housekeeping job: purges expired idempotency records and ended rate-limit windows (every 10 minutes)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from dishka import AsyncContainer, Provider, Scope, provide_all

from application.housekeeping import PurgeExpired
from application.jobs import JobKind
from application.ports.jobs import ClaimedJob
from application.ports.platform import Clock
from entrypoints.features import Feature
from entrypoints.settings import Settings
from entrypoints.worker import in_unit

log = logging.getLogger("parley.housekeeping")
INTERVAL = timedelta(minutes=10)
KIND = "housekeeping.purge"


class HousekeepingProvider(Provider):
    scope = Scope.REQUEST
    cases = provide_all(PurgeExpired)


def purge_job(container: AsyncContainer, settings: Settings) -> JobKind:
    async def purge(job: ClaimedJob) -> datetime:
        purged = await in_unit(container, lambda unit: _execute(unit))
        if purged.idempotency_records or purged.rate_limit_windows:
            log.info("purged %d idempotency records and %d rate-limit windows", purged.idempotency_records,
                     purged.rate_limit_windows)
        return (await container.get(Clock)).now() + INTERVAL

    return JobKind(KIND, purge, recurring=True)


async def _execute(unit: object) -> object:
    return await (await unit.get(PurgeExpired)).execute()  # type: ignore[attr-defined]


FEATURE = Feature(name="housekeeping", providers=(HousekeepingProvider,), jobs=[purge_job])

"""Housekeeping job: purges expired idempotency records and ended rate-limit windows."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from dishka import AsyncContainer, Provider, Scope, provide_all

from application.housekeeping import PurgeExpired
from application.ports.platform import UnitOfWork
from entrypoints.features import Feature
from entrypoints.settings import Settings

log = logging.getLogger("parley.housekeeping")
INTERVAL_SECONDS = 600.0


class HousekeepingProvider(Provider):
    scope = Scope.REQUEST
    cases = provide_all(PurgeExpired)


async def purge_once(container: AsyncContainer) -> None:
    async with container() as request:
        purged = await (await request.get(PurgeExpired)).execute()
        await (await request.get(UnitOfWork)).commit()
    if purged.idempotency_records or purged.rate_limit_windows:
        log.info("purged %d idempotency records and %d rate-limit windows", purged.idempotency_records,
                 purged.rate_limit_windows)


async def housekeeping(container: AsyncContainer, settings: Settings, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await purge_once(container)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=INTERVAL_SECONDS)


FEATURE = Feature(name="housekeeping", providers=(HousekeepingProvider,), jobs=[housekeeping])

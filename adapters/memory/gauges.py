"""BacklogGauges on the in-memory backend: no figures (the gauges are left out of a scrape)."""

from __future__ import annotations

from datetime import datetime

from application.ports.gauges import WorkBacklog


class InMemoryBacklogGauges:
    async def read(self, now: datetime) -> WorkBacklog | None:
        return None

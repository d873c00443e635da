"""In-memory triggers and runs."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.platform import Page, PageRequest
from domain.identity import persisted
from domain.triggers import Trigger, TriggerRun, TriggerRunStatus


class InMemoryTriggerRepository:
    """``triggers``: id -> Trigger; ``trigger_runs``: id -> TriggerRun; ``trigger_run_keys``: (trigger, event) ->
    run id (the unique key)."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, trigger: Trigger) -> Trigger:
        stored = replace(trigger, id=self.uow.store.next_id("triggers"))
        (await self.uow.tables())["triggers"][stored.id] = stored
        return stored

    async def get(self, organization_id: int, trigger_id: int) -> Trigger | None:
        found = (await self.uow.tables())["triggers"].get(trigger_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def list(self, organization_id: int, page: PageRequest) -> Page[Trigger]:
        mine = sorted((t for t in (await self.uow.tables())["triggers"].values()
                       if t.organization_id == organization_id), key=lambda t: persisted(t.id))
        return page.slice(mine)

    async def update(self, trigger: Trigger) -> Trigger:
        current = await self.get(trigger.organization_id, persisted(trigger.id))
        if current is not None:
            (await self.uow.tables())["triggers"][current.id] = replace(trigger, sealed_secret=current.sealed_secret,
                                                                        created_at=current.created_at)
        return trigger

    async def delete(self, organization_id: int, trigger_id: int) -> bool:
        tables = await self.uow.tables()
        if await self.get(organization_id, trigger_id) is None:
            return False
        del tables["triggers"][trigger_id]
        for run_id in [r.id for r in tables["trigger_runs"].values() if r.trigger_id == trigger_id]:
            run = tables["trigger_runs"].pop(run_id)
            tables["trigger_run_keys"].pop((run.trigger_id, run.event_id), None)
        return True

    async def for_event(self, organization_id: int, event: str) -> builtins.list[Trigger]:
        return sorted((t for t in (await self.uow.tables())["triggers"].values()
                       if t.organization_id == organization_id and t.event == event and t.enabled),
                      key=lambda t: persisted(t.id))

    async def disable(self, organization_id: int, trigger_id: int, reason: str, at: datetime) -> None:
        current = await self.get(organization_id, trigger_id)
        if current is not None:
            (await self.uow.tables())["triggers"][trigger_id] = replace(current, enabled=False, disabled_reason=reason,
                                                                        updated_at=at)

    async def count_matched_runs(self, organization_id: int, trigger_id: int, since: datetime) -> int:
        return sum(1 for r in (await self.uow.tables())["trigger_runs"].values()
                   if r.organization_id == organization_id and r.trigger_id == trigger_id and r.matched
                   and r.event_at is not None and r.event_at >= since)

    async def add_runs(self, runs: Sequence[TriggerRun]) -> builtins.list[TriggerRun]:
        tables = await self.uow.tables()
        stored = []
        for run in runs:
            key = (run.trigger_id, run.event_id)
            if key in tables["trigger_run_keys"]:
                continue
            new = replace(run, id=self.uow.store.next_id("trigger_runs"))
            tables["trigger_runs"][new.id] = new
            tables["trigger_run_keys"][key] = new.id
            stored.append(new)
        return stored

    async def get_run(self, organization_id: int, run_id: int, *, lock: bool = False) -> TriggerRun | None:
        found = (await self.uow.tables())["trigger_runs"].get(run_id)
        return found if found is not None and found.organization_id == organization_id else None

    async def update_run(self, run: TriggerRun) -> TriggerRun:
        tables = await self.uow.tables()
        current = tables["trigger_runs"].get(run.id)
        if current is not None:
            tables["trigger_runs"][run.id] = replace(current, status=run.status, actions=run.actions,
                                                     finished_at=run.finished_at)
        return run

    async def list_runs(self, organization_id: int, trigger_id: int, status: str | None,
                        page: PageRequest) -> Page[TriggerRun]:
        mine = sorted((r for r in (await self.uow.tables())["trigger_runs"].values()
                       if r.organization_id == organization_id and r.trigger_id == trigger_id
                       and status in (None, r.status)), key=lambda r: persisted(r.id), reverse=True)
        return page.slice(mine)

    async def purge_runs(self, before: datetime) -> int:
        runs = (await self.uow.tables())["trigger_runs"]
        gone = [run.id for run in runs.values()
                if run.status != TriggerRunStatus.RUNNING and (run.finished_at or run.created_at or before) < before]
        for run_id in gone:
            del runs[run_id]
        return len(gone)

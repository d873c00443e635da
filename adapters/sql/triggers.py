"""SQL repository for triggers and their runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.dialect import insert
from adapters.sql.paging import fetch_page
from adapters.sql.triggers_tables import trigger_runs, triggers
from adapters.sql.uow import SqlUnitOfWork
from application.ports.platform import Page, PageRequest
from domain import triggers as rules
from domain.rfc3339 import format_utc_millis, parse_instant
from domain.triggers import Action, ActionResult, Trigger, TriggerRun


def _stamp(value: datetime | None) -> str | None:
    return format_utc_millis(value) if value is not None else None


def _unstamp(value: str | None) -> datetime | None:
    return parse_instant(value, "at") if value else None


def actions_to_json(results: Sequence[ActionResult]) -> list[dict[str, Any]]:
    return [{"type": a.type, "status": a.status, "attempts": a.attempts, "error": a.error,
             "started_at": _stamp(a.started_at), "finished_at": _stamp(a.finished_at),
             "next_attempt_at": _stamp(a.next_attempt_at)} for a in results]


def actions_from_json(raw: Sequence[dict[str, Any]]) -> tuple[ActionResult, ...]:
    return tuple(ActionResult(a["type"], a["status"], int(a["attempts"]), a.get("error"),
                              _unstamp(a.get("started_at")), _unstamp(a.get("finished_at")),
                              _unstamp(a.get("next_attempt_at"))) for a in raw)


def _row_to_trigger(row: Any) -> Trigger:
    return Trigger(row.id, row.organization_id, row.name, row.event, rules.conditions_from_view(row.conditions),
                   tuple(Action(a["type"], a["config"]) for a in row.actions), bool(row.enabled), row.sealed_secret,
                   row.created_at, row.updated_at)


def _row_to_run(row: Any) -> TriggerRun:
    return TriggerRun(row.id, row.organization_id, row.trigger_id, row.event, row.event_id, row.depth,
                      bool(row.matched), row.status, rules.trace_from_view(row.condition_trace),
                      actions_from_json(row.actions), dict(row.data or {}), row.reason, row.created_at,
                      row.finished_at)


def _trigger_values(t: Trigger) -> dict[str, Any]:
    return {"organization_id": t.organization_id, "name": t.name, "event": t.event,
            "conditions": rules.conditions_view(t.conditions), "actions": [a.view() for a in t.actions],
            "enabled": t.enabled, "sealed_secret": t.sealed_secret, "created_at": t.created_at,
            "updated_at": t.updated_at}


def _run_values(r: TriggerRun) -> dict[str, Any]:
    return {"organization_id": r.organization_id, "trigger_id": r.trigger_id, "event": r.event,
            "event_id": r.event_id, "depth": r.depth, "matched": r.matched, "status": r.status,
            "condition_trace": [s.view() for s in r.condition_trace], "actions": actions_to_json(r.actions),
            "data": dict(r.data), "reason": r.reason, "created_at": r.created_at, "finished_at": r.finished_at}


class SqlTriggerRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, trigger: Trigger) -> Trigger:
        conn = await self.uow.connection()
        row = (await conn.execute(triggers.insert().values(**_trigger_values(trigger)).returning(*triggers.c))).one()
        return _row_to_trigger(row)

    async def get(self, organization_id: int, trigger_id: int) -> Trigger | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(triggers).where(triggers.c.organization_id == organization_id,
                                                            triggers.c.id == trigger_id))).first()
        return _row_to_trigger(row) if row else None

    async def list(self, organization_id: int, page: PageRequest) -> Page[Trigger]:
        conn = await self.uow.connection()
        rows, total = await fetch_page(conn, list(triggers.c), triggers.c.organization_id == organization_id,
                                       [triggers.c.id], page)
        return Page([_row_to_trigger(r) for r in rows], total, page.limit, page.offset)

    async def update(self, trigger: Trigger) -> Trigger:
        conn = await self.uow.connection()
        values = _trigger_values(trigger)
        del values["created_at"], values["sealed_secret"]
        await conn.execute(triggers.update().where(triggers.c.organization_id == trigger.organization_id,
                                                   triggers.c.id == trigger.id).values(**values))
        return trigger

    async def delete(self, organization_id: int, trigger_id: int) -> bool:
        conn = await self.uow.connection()
        await conn.execute(trigger_runs.delete().where(trigger_runs.c.organization_id == organization_id,
                                                       trigger_runs.c.trigger_id == trigger_id))
        result = await conn.execute(triggers.delete().where(triggers.c.organization_id == organization_id,
                                                            triggers.c.id == trigger_id))
        return bool(result.rowcount)

    async def for_event(self, organization_id: int, event: str) -> list[Trigger]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(triggers).where(
            triggers.c.organization_id == organization_id, triggers.c.event == event,
            triggers.c.enabled.is_(True)).order_by(triggers.c.id))
        return [_row_to_trigger(r) for r in rows]

    async def add_runs(self, runs: Sequence[TriggerRun]) -> list[TriggerRun]:
        if not runs:
            return []
        conn = await self.uow.connection()
        # ON CONFLICT (trigger_id, event_id) DO NOTHING: a run another worker (or an earlier pass that crashed
        # after committing) stored is never stored twice; a concurrent insert waits for the other transaction
        # (one statement, compiled once and cached, executed for many rows: SQLAlchemy batches them into
        # multi-row INSERT ... RETURNING on both databases)
        stmt = insert(trigger_runs, self.uow.dialect).on_conflict_do_nothing(
            index_elements=["trigger_id", "event_id"]).returning(trigger_runs.c.id, trigger_runs.c.trigger_id,
                                                                 trigger_runs.c.event_id)
        rows = (await conn.execute(stmt, [_run_values(r) for r in runs])).all()
        stored = {(row.trigger_id, row.event_id): row.id for row in rows}
        return sorted((replace(r, id=stored[(r.trigger_id, r.event_id)]) for r in runs
                       if (r.trigger_id, r.event_id) in stored), key=lambda r: r.id or 0)

    async def get_run(self, organization_id: int, run_id: int, *, lock: bool = False) -> TriggerRun | None:
        conn = await self.uow.connection()
        query = sa.select(trigger_runs).where(trigger_runs.c.organization_id == organization_id,
                                              trigger_runs.c.id == run_id)
        if lock and self.uow.dialect == "postgresql":
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return _row_to_run(row) if row else None

    async def update_run(self, run: TriggerRun) -> TriggerRun:
        conn = await self.uow.connection()
        await conn.execute(trigger_runs.update().where(trigger_runs.c.organization_id == run.organization_id,
                                                       trigger_runs.c.id == run.id).values(
            status=run.status, actions=actions_to_json(run.actions), finished_at=run.finished_at))
        return run

    async def list_runs(self, organization_id: int, trigger_id: int, status: str | None,
                        page: PageRequest) -> Page[TriggerRun]:
        conn = await self.uow.connection()
        where = [trigger_runs.c.organization_id == organization_id, trigger_runs.c.trigger_id == trigger_id]
        if status is not None:
            where.append(trigger_runs.c.status == status)
        rows, total = await fetch_page(conn, list(trigger_runs.c), sa.and_(*where), [trigger_runs.c.id.desc()], page)
        return Page([_row_to_run(r) for r in rows], total, page.limit, page.offset)

    async def purge_runs(self, before: datetime) -> int:
        conn = await self.uow.connection()
        ended = sa.func.coalesce(trigger_runs.c.finished_at, trigger_runs.c.created_at)
        result = await conn.execute(trigger_runs.delete().where(trigger_runs.c.status != "running", ended < before))
        return int(result.rowcount or 0)

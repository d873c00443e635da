"""SQL repository for triggers and their runs."""

from __future__ import annotations

import builtins
import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from adapters.sql.paging import fetch_page
from adapters.sql.triggers_tables import trigger_runs, triggers
from adapters.sql.uow import SqlUnitOfWork
from application.ports.platform import Page, PageRequest
from domain import triggers as rules
from domain.identity import persisted
from domain.rfc3339 import format_utc_millis, parse_instant
from domain.triggers import Action, ActionResult, Trigger, TriggerRun, TriggerRunStatus


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
                   row.created_at, row.updated_at, row.disabled_reason)


def _row_to_run(row: Any) -> TriggerRun:
    return TriggerRun(row.id, row.organization_id, row.trigger_id, row.event, row.event_id, row.depth,
                      bool(row.matched), row.status, rules.trace_from_view(row.condition_trace),
                      actions_from_json(row.actions), dict(row.data or {}), row.reason, row.created_at,
                      row.finished_at, row.event_at)


def _trigger_values(t: Trigger) -> dict[str, Any]:
    return {"organization_id": t.organization_id, "name": t.name, "event": t.event,
            "conditions": rules.conditions_view(t.conditions), "actions": [a.view() for a in t.actions],
            "enabled": t.enabled, "sealed_secret": t.sealed_secret, "created_at": t.created_at,
            "updated_at": t.updated_at, "disabled_reason": t.disabled_reason}


def _other(value: Any) -> Any:
    """What JSON has no form of: any mapping as an object, anything else as its text."""
    return dict(value) if isinstance(value, Mapping) else str(value)


_ENCODER = msgspec.json.Encoder(enc_hook=_other)


def to_json(value: Any) -> str:
    """JSON text, by msgspec (dataclasses as objects, tuples as arrays, datetimes as RFC 3339); what it refuses
    (a lone surrogate in a string) through json, the same way."""
    try:
        return _ENCODER.encode(value).decode()
    except (msgspec.EncodeError, TypeError, ValueError):
        return json.dumps(value, default=_plain)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return value.isoformat() if isinstance(value, datetime) else _other(value)


_RUN_COLUMNS = ("organization_id", "trigger_id", "event", "event_id", "depth", "matched", "status",
                "condition_trace", "actions", "data", "reason", "created_at", "finished_at", "event_at")
_JSON_COLUMNS = frozenset({"condition_trace", "actions", "data"})
_STORED = (trigger_runs.c.id, trigger_runs.c.trigger_id, trigger_runs.c.event_id)


def _aware(runs: Sequence[TriggerRun]) -> Sequence[TriggerRun]:
    for r in runs:
        if r.created_at is None or r.created_at.tzinfo is None or (r.finished_at and r.finished_at.tzinfo is None) or (
                r.event_at and r.event_at.tzinfo is None):
            raise ValueError("a run's times must be aware datetimes")
    return runs


# PostgreSQL: a whole pass in one statement of constant text (prepared once per connection) with one parameter:
# the runs as one JSON array, encoded by one msgspec call (a run an object of its fields, its trace's steps
# arrays, ``TraceStep`` being a tuple), read back into typed rows by the server. One row comes back: the ids of the
# runs stored, aggregated (a run stored already is left out)
_ADD_RUNS_POSTGRESQL = sa.text(f"""
WITH stored AS (
  INSERT INTO trigger_runs ({", ".join(_RUN_COLUMNS)})
  SELECT {", ".join(_RUN_COLUMNS)}
  FROM jsonb_to_recordset(CAST(:runs AS jsonb)) AS r(
    organization_id bigint, trigger_id bigint, event text, event_id bigint, depth smallint, matched boolean,
    status text, condition_trace jsonb, actions jsonb, data jsonb, reason text, created_at timestamptz,
    finished_at timestamptz, event_at timestamptz)
  ON CONFLICT (trigger_id, event_id) DO NOTHING
  RETURNING id, trigger_id, event_id)
SELECT array_agg(id), array_agg(trigger_id), array_agg(event_id) FROM stored
""")
# SQLite: one statement executed for many rows (SQLAlchemy sends them as multi-row INSERTs), the JSON members as
# the text encoded here
_ADD_RUNS_SQLITE = sqlite.insert(trigger_runs).values({
    name: sa.bindparam(name, type_=sa.Text() if name in _JSON_COLUMNS else trigger_runs.c[name].type)
    for name in _RUN_COLUMNS}).on_conflict_do_nothing(index_elements=["trigger_id", "event_id"]).returning(*_STORED)


def _sqlite_row(r: TriggerRun) -> dict[str, Any]:
    return {"organization_id": r.organization_id, "trigger_id": r.trigger_id, "event": r.event,
            "event_id": r.event_id, "depth": r.depth, "matched": r.matched, "status": r.status,
            "condition_trace": to_json(r.condition_trace), "actions": to_json(r.actions), "data": to_json(r.data),
            "reason": r.reason, "created_at": r.created_at, "finished_at": r.finished_at, "event_at": r.event_at}


def _with_id(r: TriggerRun, run_id: int) -> TriggerRun:
    return TriggerRun(run_id, r.organization_id, r.trigger_id, r.event, r.event_id, r.depth, r.matched, r.status,
                      r.condition_trace, r.actions, r.data, r.reason, r.created_at, r.finished_at, r.event_at)


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

    async def for_event(self, organization_id: int, event: str) -> builtins.list[Trigger]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(triggers).where(
            triggers.c.organization_id == organization_id, triggers.c.event == event,
            triggers.c.enabled.is_(True)).order_by(triggers.c.id))
        return [_row_to_trigger(r) for r in rows]

    async def disable(self, organization_id: int, trigger_id: int, reason: str, at: datetime) -> None:
        conn = await self.uow.connection()
        await conn.execute(triggers.update().where(triggers.c.organization_id == organization_id,
                                                   triggers.c.id == trigger_id).values(
            enabled=False, disabled_reason=reason, updated_at=at))

    async def count_matched_runs(self, organization_id: int, trigger_id: int, since: datetime) -> int:
        conn = await self.uow.connection()
        return int((await conn.execute(sa.select(sa.func.count()).select_from(trigger_runs).where(
            trigger_runs.c.trigger_id == trigger_id, trigger_runs.c.event_at >= since,
            trigger_runs.c.organization_id == organization_id, trigger_runs.c.matched.is_(True)))).scalar_one())

    async def add_runs(self, runs: Sequence[TriggerRun]) -> builtins.list[TriggerRun]:
        if not runs:
            return []
        conn = await self.uow.connection()
        # ON CONFLICT (trigger_id, event_id) DO NOTHING: a run another worker (or an earlier pass that crashed
        # after committing) stored is never stored twice; a concurrent insert waits for the other transaction
        if self.uow.dialect == "postgresql":
            ids, trigger_ids, event_ids = (await conn.execute(_ADD_RUNS_POSTGRESQL, {
                "runs": to_json(_aware(runs))})).one()
            stored = dict(zip(zip(trigger_ids or (), event_ids or (), strict=True), ids or (), strict=True))
        else:
            stored = {(row.trigger_id, row.event_id): row.id for row in await conn.execute(
                _ADD_RUNS_SQLITE, [_sqlite_row(r) for r in runs])}
        return sorted((_with_id(r, stored[(r.trigger_id, r.event_id)]) for r in runs
                       if (r.trigger_id, r.event_id) in stored), key=lambda r: persisted(r.id))

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
        settled = trigger_runs.c.status != TriggerRunStatus.RUNNING
        result = await conn.execute(trigger_runs.delete().where(settled, ended < before))
        return int(result.rowcount or 0)

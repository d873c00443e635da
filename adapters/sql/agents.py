"""SQL repository for agents and their versions."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
import sqlalchemy as sa

from adapters.sql.agent_counts_tables import agent_counts
from adapters.sql.dialect import insert
from adapters.sql.paging import fetch_page
from adapters.sql.tables import agent_versions, agents
from adapters.sql.uow import SqlUnitOfWork
from application.ports.agents import AgentFilter
from application.ports.platform import Page, PageRequest
from domain.agents import Agent, AgentVersion

_COLUMNS = [c for c in agents.c if c.name != "deleted_at"]


# An Agent from a row of _COLUMNS, built by msgspec in C: the frozen dataclass and its nested value objects (a key
# missing from stored JSON takes the field's default), each value's type checked on the way. Rows of the list come
# in their thousands per second; this is 2.5x faster than filling the slots from Python. The keys are plain str
# (msgspec takes no subclass of it, such as SQLAlchemy's quoted_name).
_NAMES = tuple(str(c.name) for c in _COLUMNS)
_AGENTS = list[Agent]
_AGENTS_DECODER = msgspec.json.Decoder(_AGENTS)


def _row_to_agent(row: Any) -> Agent:
    return msgspec.convert(dict(zip(_NAMES, row, strict=True)), Agent)


def _rows_to_agents(rows: Any) -> list[Agent]:
    # a page's rows end with the _total column, which the zip leaves out
    return msgspec.convert([dict(zip(_NAMES, row, strict=False)) for row in rows], _AGENTS)


def _agent_values(agent: Agent) -> dict[str, Any]:
    return {
        "organization_id": agent.organization_id, "name": agent.name, "description": agent.description,
        "status": agent.status, "agent_mode": agent.agent_mode, "language": agent.language,
        "voice": {"provider": agent.voice.provider, "voice_id": agent.voice.voice_id,
                  "provider_id": agent.voice.provider_id, "speed": agent.voice.speed},
        "llm": {"model": agent.llm.model, "temperature": agent.llm.temperature, "provider_id": agent.llm.provider_id},
        "transcriber": {"provider_id": agent.transcriber.provider_id, "model": agent.transcriber.model,
                        "language": agent.transcriber.language},
        "tools": [tool.as_dict() for tool in agent.tools], "analysis_schema": agent.analysis_schema,
        "end_of_turn_silence_ms": agent.end_of_turn_silence_ms,
        "prompt": agent.prompt, "first_message": agent.first_message,
        "max_call_duration_seconds": agent.max_call_duration_seconds,
        "voicemail": {"action": agent.voicemail.action, "message": agent.voicemail.message},
        "transfer_phone": agent.transfer_phone, "calendar_id": agent.calendar_id, "timezone": agent.timezone,
        "metadata": agent.metadata, "current_version": agent.current_version,
        "has_unpublished_changes": agent.has_unpublished_changes,
        "created_at": agent.created_at, "updated_at": agent.updated_at,
    }


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# The live agents of one organization, as the partial index ix_agents_org_live (organization_id, id)
# WHERE deleted_at IS NULL holds them. SQLite's planner (3.40) prefers ix_agents_organization_id for a
# count and then reads every row to test deleted_at (about 5x slower at 10,000 agents), so on SQLite the
# count names the index explicitly; it reads the same columns through unqualified names.
_SQLITE_LIVE_AGENTS = sa.text("agents INDEXED BY ix_agents_org_live")
_UNQUALIFIED: dict[str, sa.ColumnClause[Any]] = {
    name: sa.column(name) for name in ("organization_id", "deleted_at", "status", "agent_mode", "name", "description")}


def _conditions(c: Any, status: bool, agent_mode: bool, search: bool) -> Any:
    where = [c["organization_id"] == sa.bindparam("org"), c["deleted_at"].is_(None)]
    if status:
        where.append(c["status"] == sa.bindparam("status"))
    if agent_mode:
        where.append(c["agent_mode"] == sa.bindparam("agent_mode"))
    if search:
        pattern: sa.BindParameter[str] = sa.bindparam("pattern")
        where.append(sa.or_(sa.func.lower(c["name"]).like(pattern, escape="\\"),
                            sa.func.lower(sa.func.coalesce(c["description"], "")).like(pattern, escape="\\")))
    return sa.and_(*where)


# an unfiltered list reads its total from agent_counts (kept with every create and delete) instead of counting
_LIVE_TOTAL = sa.select(sa.func.coalesce(
    sa.select(agent_counts.c.live).where(agent_counts.c.organization_id == sa.bindparam("org")).scalar_subquery(), 0))


# On SQLite a page's agent is one JSON document built by the database (json_object, in C), the stored JSON
# columns embedded as they are and the stored UTC times marked as such: msgspec then reads the whole page into
# Agents in one call, where decoding four JSON columns and two times per row took a Python call each.
_EMBEDDED = frozenset({"voice", "llm", "voicemail", "metadata", "transcriber", "tools", "analysis_schema"})
_UTC_TEXT = frozenset({"created_at", "updated_at"})
_BOOLEAN = frozenset({"has_unpublished_changes"})  # stored as 0 or 1, which msgspec does not read as a bool


def _sqlite_document() -> Any:
    parts: list[Any] = []
    for column in _COLUMNS:
        name = str(column.name)
        parts.append(sa.literal_column(f"'{name}'"))
        if name in _EMBEDDED:
            parts.append(sa.func.json(column))
        elif name in _BOOLEAN:
            parts.append(sa.func.json(sa.case((column == sa.true(), "true"), else_="false")))
        elif name in _UTC_TEXT:  # stored as naive UTC text (2026-11-24 12:53:43.825953)
            parts.append(sa.type_coerce(column, sa.String) + sa.literal_column("'Z'"))
        else:
            parts.append(column)
    return sa.type_coerce(sa.func.json_object(*parts), sa.String).label("document")


# PostgreSQL builds the same document (json_build_object; jsonb embedded as it is, booleans as JSON booleans, times
# written in UTC with a Z), sent as text: the page becomes Agents in one msgspec call there too, where asyncpg's
# records, four jsonb values and two times per row each cost a Python step.
_PG_UTC = "YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\""


def _postgresql_document() -> Any:
    parts: list[Any] = []
    for column in _COLUMNS:
        name = str(column.name)
        parts.append(sa.literal_column(f"'{name}'"))
        if name in _UTC_TEXT:
            parts.append(sa.func.to_char(sa.func.timezone("UTC", column), _PG_UTC))
        else:
            parts.append(column)
    return sa.cast(sa.func.json_build_object(*parts), sa.Text).label("document")


@dataclass(frozen=True, slots=True)
class _ListQueries:
    page: Any  # the page with the total as its last column
    count: Any  # the total alone (a page past the end)
    columns: Any  # the page as columns, when the database's documents are not what msgspec reads


@functools.cache
def _list_queries(dialect: str, status: bool, agent_mode: bool, search: bool) -> _ListQueries:
    """The statements of a filter shape, built once; values are bound parameters."""
    if not (status or agent_mode or search):
        count = _LIVE_TOTAL
    elif dialect == "sqlite":
        count = sa.select(sa.func.count()).select_from(_SQLITE_LIVE_AGENTS).where(
            _conditions(_UNQUALIFIED, status, agent_mode, search))
    else:
        count = sa.select(sa.func.count()).select_from(agents).where(
            _conditions(agents.c, status, agent_mode, search)).correlate(None)

    def page(*columns: Any) -> Any:
        return (
            sa.select(*columns, count.scalar_subquery().label("_total"))
            .where(_conditions(agents.c, status, agent_mode, search))
            .order_by(agents.c.id)
            .limit(sa.bindparam("limit", type_=sa.Integer)).offset(sa.bindparam("offset", type_=sa.BigInteger))
        )

    columns = page(*_COLUMNS)
    document = _sqlite_document() if dialect == "sqlite" else _postgresql_document()
    return _ListQueries(page(document), count, columns)


# one agent by id, built once with bound parameters (the write path reads it on every call placed)
_GET_QUERY = sa.select(*_COLUMNS).where(agents.c.organization_id == sa.bindparam("org"),
                                        agents.c.deleted_at.is_(None), agents.c.id == sa.bindparam("agent_id"))
_GET_FOR_UPDATE_QUERY = _GET_QUERY.with_for_update()
_VERSION_QUERY = sa.select(agent_versions).where(agent_versions.c.organization_id == sa.bindparam("org"),
                                                 agent_versions.c.agent_id == sa.bindparam("agent_id"),
                                                 agent_versions.c.version == sa.bindparam("version"))

# the agent and its current published version, one round trip (a call is placed with both)
_PUBLISHED = agent_versions.alias("published")
_WITH_CURRENT_VERSION_QUERY = (
    sa.select(*_COLUMNS, _PUBLISHED.c.version.label("published_version"),
              _PUBLISHED.c.snapshot.label("published_snapshot"), _PUBLISHED.c.created_at.label("published_at"),
              _PUBLISHED.c.created_by.label("published_by"))
    .select_from(agents.outerjoin(_PUBLISHED, sa.and_(
        _PUBLISHED.c.organization_id == agents.c.organization_id, _PUBLISHED.c.agent_id == agents.c.id,
        _PUBLISHED.c.version == agents.c.current_version)))
    .where(agents.c.organization_id == sa.bindparam("org"), agents.c.deleted_at.is_(None),
           agents.c.id == sa.bindparam("agent_id"))
)


_WITH_CURRENT = "agent_with_current_version"
"""``SqlUnitOfWork.read_once`` key of an agent and its published version: ``(_WITH_CURRENT, (org, id))``."""


class SqlAgentRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    def _live(self, organization_id: int) -> Any:
        return sa.and_(agents.c.organization_id == organization_id, agents.c.deleted_at.is_(None))

    async def add(self, agent: Agent) -> Agent:
        conn = await self.uow.connection()
        row = (await conn.execute(agents.insert().returning(*_COLUMNS), _agent_values(agent))).one()
        await self._count(agent.organization_id, 1)
        return _row_to_agent(row)

    async def _count(self, organization_id: int, change: int) -> None:
        """Keep agent_counts in step, in the transaction of the change."""
        conn = await self.uow.connection()
        stmt = insert(agent_counts, self.uow.dialect).values(organization_id=organization_id, live=max(change, 0))
        await conn.execute(stmt.on_conflict_do_update(index_elements=["organization_id"],
                                                      set_={"live": agent_counts.c.live + change}))

    async def _get(self, organization_id: int, agent_id: int, lock: bool) -> Agent | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_GET_FOR_UPDATE_QUERY if lock else _GET_QUERY,
                                  {"org": organization_id, "agent_id": agent_id})).first()
        return _row_to_agent(row) if row else None

    async def get(self, organization_id: int, agent_id: int) -> Agent | None:
        return await self._get(organization_id, agent_id, lock=False)

    async def get_for_update(self, organization_id: int, agent_id: int) -> Agent | None:
        return await self._get(organization_id, agent_id, lock=True)

    async def list(self, organization_id: int, filters: AgentFilter, page: PageRequest) -> Page[Agent]:
        params: dict[str, Any] = {"org": organization_id, "limit": page.limit, "offset": page.offset}
        if filters.status:
            params["status"] = filters.status
        if filters.agent_mode:
            params["agent_mode"] = filters.agent_mode
        if filters.search:
            params["pattern"] = f"%{_escape_like(filters.search.lower())}%"
        queries = _list_queries(self.uow.dialect, bool(filters.status), bool(filters.agent_mode),
                                bool(filters.search))
        # one round trip: the page with the total as its last column; a page past the end needs a count
        conn = await self.uow.connection()
        rows = (await conn.execute(queries.page, params)).all()
        total = rows[0][-1] if rows else (await conn.execute(queries.count, params)).scalar_one()
        try:
            found = _AGENTS_DECODER.decode("[" + ",".join([row[0] for row in rows]) + "]")
        except (msgspec.ValidationError, msgspec.DecodeError):
            # a stored value of another shape (SQLite: a time with an offset of its own; a number msgspec reads
            # only through the columns' own decoder)
            found = _rows_to_agents((await conn.execute(queries.columns, params)).all())
        return Page(found, total, page.limit, page.offset)

    async def update(self, agent: Agent) -> Agent:
        self._forget(agent.organization_id, agent.id)
        conn = await self.uow.connection()
        values = _agent_values(agent)
        values.pop("created_at")
        values.pop("organization_id")
        await conn.execute(agents.update().where(self._live(agent.organization_id), agents.c.id == agent.id)
                           .values(**values))
        return agent

    async def delete(self, organization_id: int, agent_id: int, at: datetime) -> None:
        self._forget(organization_id, agent_id)
        conn = await self.uow.connection()
        result = await conn.execute(agents.update().where(self._live(organization_id), agents.c.id == agent_id)
                                    .values(deleted_at=at))
        if result.rowcount:
            await self._count(organization_id, -result.rowcount)

    async def add_version(self, organization_id: int, version: AgentVersion) -> None:
        self._forget(organization_id, version.agent_id)
        conn = await self.uow.connection()
        await conn.execute(agent_versions.insert(), {
            "organization_id": organization_id, "agent_id": version.agent_id, "version": version.version,
            "snapshot": version.snapshot, "created_at": version.created_at, "created_by": version.created_by,
        })

    async def list_versions(self, organization_id: int, agent_id: int, page: PageRequest) -> Page[AgentVersion]:
        conn = await self.uow.connection()
        rows, total = await fetch_page(conn, list(agent_versions.c), sa.and_(
            agent_versions.c.organization_id == organization_id, agent_versions.c.agent_id == agent_id,
        ), [agent_versions.c.version], page)
        return Page([AgentVersion(r.agent_id, r.version, dict(r.snapshot), r.created_at, r.created_by) for r in rows],
                    total, page.limit, page.offset)

    async def get_with_current_version(self, organization_id: int, agent_id: int
                                       ) -> tuple[Agent, AgentVersion | None] | None:
        """Read once per transaction (``SqlUnitOfWork.read_once``): the dialer's step checks the campaign's agent,
        then ``PlaceCall`` reads it again in the same transaction. A write to the agent forgets it."""
        key = (_WITH_CURRENT, (organization_id, agent_id))
        if key in self.uow.read_once:
            kept: tuple[Agent, AgentVersion | None] | None = self.uow.read_once[key]
            return kept
        found = self.uow.read_once[key] = await self._with_current_version(organization_id, agent_id)
        return found

    def _forget(self, organization_id: int, agent_id: int | None) -> None:
        self.uow.read_once.pop((_WITH_CURRENT, (organization_id, agent_id)), None)

    async def _with_current_version(self, organization_id: int, agent_id: int
                                    ) -> tuple[Agent, AgentVersion | None] | None:
        conn = await self.uow.connection()
        row = (await conn.execute(_WITH_CURRENT_VERSION_QUERY, {"org": organization_id, "agent_id": agent_id})).first()
        if row is None:
            return None
        agent = msgspec.convert(dict(zip(_NAMES, row, strict=False)), Agent)
        if row.published_version is None:
            return agent, None
        return agent, AgentVersion(agent.id or agent_id, row.published_version, dict(row.published_snapshot),
                                   row.published_at, row.published_by)

    async def get_version(self, organization_id: int, agent_id: int, version: int) -> AgentVersion | None:
        conn = await self.uow.connection()
        r = (await conn.execute(_VERSION_QUERY, {"org": organization_id, "agent_id": agent_id,
                                                 "version": version})).first()
        return AgentVersion(r.agent_id, r.version, dict(r.snapshot), r.created_at, r.created_by) if r else None

"""The peers bench/run.py measures Parley against, on Parley's own tables in the same database (no Parley code):

- ``fastapi``: FastAPI + pydantic v2 + the SQLAlchemy ORM (an async session per request), served by uvicorn
  with uvloop and httptools (uvicorn[standard]); a typical well-built Python API.
- ``raw``: Litestar + msgspec with the driver directly (asyncpg, or the standard library's sqlite3), no
  SQLAlchemy: the floor of what a Python ASGI app can do with the same database work.

Both serve, without authentication:

- ``GET /agents?limit=25&offset=0``: the organization's first 25 live agents and their total, as Parley's
  ``GET /v2/agents`` returns them (``{"data": [...], "meta": {"total", "limit", "offset"}}``, the same fields and
  values; bench/run.py checks that the data are identical). The total is read from ``agent_counts`` as Parley
  reads it, so all three do the same database work.
- ``POST /calls`` with Parley's call body (``bot_id``, ``destination_phone``, ``contact_name``, ``custom_data``):
  inserts one queued call row and answers 201 with it: the insert alone, none of Parley's write path
  (authentication, idempotency claim, DNC screen, quota, outbox).
- ``POST /calls/full`` (``fastapi`` only): the same call, with the work of Parley's write path done the usual
  FastAPI + ORM way, in one transaction: the ``Idempotency-Key``'s record read (a stored response is replayed),
  the agent read, the destination looked up in the organization's DNC entries (listed: 422), the call and an
  outbox event inserted, and the idempotency record stored with the response; one commit. No authentication,
  rate limit or quota: Parley does those on top.

    python bench/peers.py serve --app fastapi|raw --database-url URL --port P [--server granian|uvicorn]
                                [--loop auto|uvloop] [--organization 1]
"""


import argparse
import hashlib
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

URL_ENV = "BENCH_DATABASE_URL"
ORG_ENV = "BENCH_ORGANIZATION_ID"
PROMPT = "You are a friendly assistant calling {{contact_name}}."
CALLER = "+15550000000"

_AGENT_COLUMNS = ("id", "name", "description", "status", "agent_mode", "language", "voice", "llm", "prompt",
                  "first_message", "max_call_duration_seconds", "voicemail", "transfer_phone", "calendar_id",
                  "timezone", "metadata", "transcriber", "tools", "analysis_schema", "end_of_turn_silence_ms",
                  "current_version", "has_unpublished_changes", "created_at", "updated_at")
_JSON_COLUMNS = {"voice", "llm", "voicemail", "metadata", "transcriber", "tools", "analysis_schema"}
# what Parley serves of a stored setting the row leaves out (the domain's defaults)
_DEFAULTS = {"voice": {"provider_id": None, "speed": 1.0}, "llm": {"provider_id": None},
             "transcriber": {"provider_id": None, "model": None, "language": None}}


# --- FastAPI + pydantic v2 + SQLAlchemy ORM ---------------------------------------------------------------------


def make_fastapi() -> Any:
    import sqlalchemy as sa
    from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict, Field
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
    from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

    class UtcDateTime(sa.types.TypeDecorator[datetime]):
        impl = sa.DateTime(timezone=True)
        cache_ok = True

        def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
            if value is None:
                return None
            value = value.astimezone(UTC)
            return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

        def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
            return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

    class Base(DeclarativeBase):
        pass

    class AgentRow(Base):
        __tablename__ = "agents"
        id: Mapped[int] = mapped_column(BigId, primary_key=True)
        organization_id: Mapped[int] = mapped_column(BigId)
        name: Mapped[str]
        description: Mapped[str | None]
        status: Mapped[str]
        agent_mode: Mapped[str]
        language: Mapped[str]
        voice: Mapped[dict[str, Any]] = mapped_column(Json)
        llm: Mapped[dict[str, Any]] = mapped_column(Json)
        prompt: Mapped[str]
        first_message: Mapped[str | None]
        max_call_duration_seconds: Mapped[int]
        voicemail: Mapped[dict[str, Any]] = mapped_column(Json)
        transfer_phone: Mapped[str | None]
        calendar_id: Mapped[int | None] = mapped_column(BigId)
        timezone: Mapped[str]
        metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", Json)
        transcriber: Mapped[dict[str, Any]] = mapped_column(Json)
        tools: Mapped[list[dict[str, Any]]] = mapped_column(Json)
        analysis_schema: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)
        end_of_turn_silence_ms: Mapped[int]
        current_version: Mapped[int | None]
        has_unpublished_changes: Mapped[bool]
        created_at: Mapped[datetime] = mapped_column(UtcDateTime)
        updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
        deleted_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    class AgentCountRow(Base):
        __tablename__ = "agent_counts"
        organization_id: Mapped[int] = mapped_column(BigId, primary_key=True)
        live: Mapped[int]

    class CallRow(Base):
        __tablename__ = "calls"
        id: Mapped[str] = mapped_column(sa.String(36), primary_key=True)
        organization_id: Mapped[int] = mapped_column(BigId)
        agent_id: Mapped[int] = mapped_column(BigId)
        destination_phone: Mapped[str]
        from_phone: Mapped[str]
        contact_name: Mapped[str | None]
        custom_data: Mapped[dict[str, Any]] = mapped_column(Json)
        prompt: Mapped[str]
        max_duration_seconds: Mapped[int]
        status: Mapped[str]
        telephony_state: Mapped[dict[str, Any]] = mapped_column(Json)
        deadline_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
        created_at: Mapped[datetime] = mapped_column(UtcDateTime)
        updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
        priority: Mapped[int]
        due_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    class IdempotencyRow(Base):
        __tablename__ = "idempotency_keys"
        organization_id: Mapped[int] = mapped_column(BigId, primary_key=True)
        lineage_id: Mapped[int] = mapped_column(BigId, primary_key=True)
        key: Mapped[str] = mapped_column(primary_key=True)
        fingerprint: Mapped[str]
        token: Mapped[str]
        created_at: Mapped[datetime] = mapped_column(UtcDateTime)
        locked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
        response_status: Mapped[int | None]
        response_headers: Mapped[Any] = mapped_column(Json, nullable=True)
        response_body: Mapped[bytes | None]
        response_sealed: Mapped[bool]

    class DncEntryRow(Base):
        __tablename__ = "dnc_entries"
        list_id: Mapped[int] = mapped_column(BigId, primary_key=True)
        phone_number: Mapped[str] = mapped_column(primary_key=True)
        organization_id: Mapped[int] = mapped_column(BigId)

    class OutboxRow(Base):
        __tablename__ = "outbox_events"
        id: Mapped[int] = mapped_column(BigId, primary_key=True)
        organization_id: Mapped[int] = mapped_column(BigId)
        type: Mapped[str]
        data: Mapped[dict[str, Any]] = mapped_column(Json)
        created_at: Mapped[datetime] = mapped_column(UtcDateTime)
        depth: Mapped[int]

    class Voice(BaseModel):
        provider: str
        voice_id: str
        provider_id: int | None = None
        speed: float = 1.0

    class Llm(BaseModel):
        model: str
        temperature: float
        provider_id: int | None = None

    class Transcriber(BaseModel):
        provider_id: int | None = None
        model: str | None = None
        language: str | None = None

    class Voicemail(BaseModel):
        action: str
        message: str | None

    class AgentOut(BaseModel):
        model_config = ConfigDict(from_attributes=True, populate_by_name=True)
        id: int
        name: str
        description: str | None
        status: str
        agent_mode: str
        language: str
        voice: Voice
        llm: Llm
        prompt: str
        first_message: str | None
        max_call_duration_seconds: int
        voicemail: Voicemail
        transfer_phone: str | None
        calendar_id: int | None
        timezone: str
        metadata: dict[str, Any] = Field(validation_alias="metadata_")
        transcriber: Transcriber
        tools: list[dict[str, Any]]
        analysis_schema: dict[str, Any] | None
        end_of_turn_silence_ms: int
        current_version: int | None
        published_version: int | None = Field(validation_alias="current_version")
        has_unpublished_changes: bool
        created_at: datetime
        updated_at: datetime

    class Meta(BaseModel):
        total: int
        limit: int
        offset: int

    class AgentPage(BaseModel):
        data: list[AgentOut]
        meta: Meta

    class CallCreate(BaseModel):
        bot_id: str
        destination_phone: str = Field(pattern=r"^\+[1-9]\d{6,14}$")
        contact_name: str | None = None
        custom_data: dict[str, Any] = Field(default_factory=dict)

    class CallOut(BaseModel):
        model_config = ConfigDict(from_attributes=True)
        id: str
        agent_id: int
        status: str
        destination_phone: str
        from_phone: str
        contact_name: str | None
        custom_data: dict[str, Any]
        created_at: datetime
        updated_at: datetime

    class CallEnvelope(BaseModel):
        data: CallOut

    engine = create_async_engine(os.environ[URL_ENV], pool_size=10)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    organization = int(os.environ.get(ORG_ENV, "1"))

    async def session() -> Any:
        async with sessions() as s:
            yield s

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/agents", response_model=AgentPage)
    async def list_agents(limit: int = Query(25, ge=1, le=100), offset: int = Query(0, ge=0),
                          s: AsyncSession = Depends(session)) -> AgentPage:
        rows = (await s.scalars(sa.select(AgentRow).where(AgentRow.organization_id == organization,
                                                          AgentRow.deleted_at.is_(None))
                                .order_by(AgentRow.id).limit(limit).offset(offset))).all()
        total = await s.scalar(sa.select(AgentCountRow.live).where(AgentCountRow.organization_id == organization))
        return AgentPage(data=[AgentOut.model_validate(r) for r in rows],
                         meta=Meta(total=total or 0, limit=limit, offset=offset))

    @app.post("/calls", response_model=CallEnvelope, status_code=201)
    async def create_call(body: CallCreate, s: AsyncSession = Depends(session)) -> CallEnvelope:
        now = datetime.now(UTC)
        row = CallRow(id=str(uuid.uuid4()), organization_id=organization, agent_id=int(body.bot_id),
                      destination_phone=body.destination_phone, from_phone=CALLER, contact_name=body.contact_name,
                      custom_data=body.custom_data, prompt=PROMPT, max_duration_seconds=600, status="queued",
                      telephony_state={}, deadline_at=now + timedelta(minutes=10), created_at=now, updated_at=now,
                      priority=100, due_at=now)
        s.add(row)
        await s.commit()
        return CallEnvelope(data=CallOut.model_validate(row))

    @app.post("/calls/full", status_code=201)
    async def create_call_fully(request: Request, body: CallCreate, s: AsyncSession = Depends(session),
                                idempotency_key: str = Header()) -> Response:
        now = datetime.now(UTC)
        fingerprint = "POST /calls/full " + hashlib.sha256(await request.body()).hexdigest()
        async with s.begin():
            stored = await s.get(IdempotencyRow, (organization, 0, idempotency_key))
            if stored is not None:
                if stored.fingerprint != fingerprint:
                    return JSONResponse({"error": {"code": "idempotency_key_mismatch"}}, status_code=422)
                if stored.response_body is None:
                    return JSONResponse({"error": {"code": "idempotency_key_in_use"}}, status_code=409)
                return Response(stored.response_body, status_code=stored.response_status or 201,
                                media_type="application/json", headers={"Idempotency-Replayed": "true"})
            record = IdempotencyRow(organization_id=organization, lineage_id=0, key=idempotency_key,
                                    fingerprint=fingerprint, token=uuid.uuid4().hex, created_at=now, locked_at=now,
                                    response_sealed=False)
            s.add(record)
            agent = await s.get(AgentRow, int(body.bot_id))
            if agent is None or agent.organization_id != organization or agent.deleted_at is not None:
                raise HTTPException(404, "agent not found")
            listed = await s.scalar(sa.select(DncEntryRow.list_id).where(
                DncEntryRow.organization_id == organization, DncEntryRow.phone_number == body.destination_phone)
                .limit(1))
            if listed is not None:
                raise HTTPException(422, "dnc_blocked")
            row = CallRow(id=str(uuid.uuid4()), organization_id=organization, agent_id=agent.id,
                          destination_phone=body.destination_phone, from_phone=CALLER, contact_name=body.contact_name,
                          custom_data=body.custom_data, prompt=agent.prompt, max_duration_seconds=600,
                          status="queued", telephony_state={}, deadline_at=now + timedelta(minutes=10),
                          created_at=now, updated_at=now, priority=100, due_at=now)
            s.add(row)
            out = CallEnvelope(data=CallOut.model_validate(row))
            s.add(OutboxRow(organization_id=organization, type="call.queued",
                            data={"call_id": row.id, "agent_id": agent.id}, created_at=now, depth=0))
            content = out.model_dump_json().encode()
            record.response_status, record.response_headers = 201, [["content-type", "application/json"]]
            record.response_body = content
        return Response(content, status_code=201, media_type="application/json")

    @app.on_event("shutdown")
    async def dispose() -> None:
        await engine.dispose()

    return app


# --- Litestar + msgspec + the driver ----------------------------------------------------------------------------


def make_raw() -> Any:
    import msgspec
    from litestar import Litestar, MediaType, Response, get, post

    url = os.environ[URL_ENV]
    organization = int(os.environ.get(ORG_ENV, "1"))
    columns = ", ".join(f'"{c}"' for c in _AGENT_COLUMNS)
    decode = msgspec.json.decode
    encode = msgspec.json.encode

    class CallCreate(msgspec.Struct):
        bot_id: str
        destination_phone: str
        contact_name: str | None = None
        custom_data: dict[str, Any] = msgspec.field(default_factory=dict)

    def agent(row: Any) -> dict[str, Any]:
        out = dict(zip(_AGENT_COLUMNS, row, strict=True))
        out["published_version"] = out["current_version"]
        out["has_unpublished_changes"] = bool(out["has_unpublished_changes"])  # SQLite stores 0 or 1
        for name in _JSON_COLUMNS:
            if isinstance(out[name], str):
                out[name] = decode(out[name])
        for name, defaults in _DEFAULTS.items():
            out[name] = {**defaults, **out[name]}
        for name in ("created_at", "updated_at"):
            value = out[name]
            if isinstance(value, str):
                value = datetime.fromisoformat(value)
            out[name] = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return out

    def page(rows: list[Any], total: int, limit: int, offset: int) -> Response[bytes]:
        body = encode({"data": [agent(r) for r in rows], "meta": {"total": total, "limit": limit, "offset": offset}})
        return Response(body, media_type=MediaType.JSON)

    def created(call_id: str, data: CallCreate, now: datetime) -> Response[bytes]:
        body = encode({"data": {"id": call_id, "agent_id": int(data.bot_id), "status": "queued",
                                "destination_phone": data.destination_phone, "from_phone": CALLER,
                                "contact_name": data.contact_name, "custom_data": data.custom_data,
                                "created_at": now, "updated_at": now}})
        return Response(body, status_code=201, media_type=MediaType.JSON)

    insert_columns = ("id, organization_id, agent_id, destination_phone, from_phone, contact_name, custom_data, "
                      "prompt, max_duration_seconds, status, telephony_state, deadline_at, created_at, updated_at, "
                      "priority, due_at")

    if url.startswith("sqlite"):
        import sqlite3

        path = url.split("///", 1)[1]
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=30000")
        list_sql = (f"SELECT {columns} FROM agents WHERE organization_id = ? AND deleted_at IS NULL "
                    "ORDER BY id LIMIT ? OFFSET ?")
        total_sql = "SELECT live FROM agent_counts WHERE organization_id = ?"
        insert_sql = f"INSERT INTO calls ({insert_columns}) VALUES ({', '.join('?' * 16)})"

        @get("/agents", sync_to_thread=False)
        def list_agents(limit: int = 25, offset: int = 0) -> Response[bytes]:
            rows = conn.execute(list_sql, (organization, limit, offset)).fetchall()
            found = conn.execute(total_sql, (organization,)).fetchone()
            return page(rows, found[0] if found else 0, limit, offset)

        def stamp(at: datetime) -> str:
            return at.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")

        @post("/calls", sync_to_thread=False)
        def create_call(data: CallCreate) -> Response[bytes]:
            now, call_id = datetime.now(UTC), str(uuid.uuid4())
            conn.execute(insert_sql, (call_id, organization, int(data.bot_id), data.destination_phone, CALLER,
                                      data.contact_name, encode(data.custom_data).decode(), PROMPT, 600, "queued",
                                      "{}", stamp(now + timedelta(minutes=10)), stamp(now), stamp(now), 100,
                                      stamp(now)))
            return created(call_id, data, now)

        return Litestar(route_handlers=[list_agents, create_call], debug=False, logging_config=None,
                        openapi_config=None, on_shutdown=[lambda: conn.close()])

    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    pool: dict[str, asyncpg.Pool] = {}
    list_sql = (f"SELECT {columns}, (SELECT live FROM agent_counts WHERE organization_id = $1) AS total "
                "FROM agents WHERE organization_id = $1 AND deleted_at IS NULL ORDER BY id LIMIT $2 OFFSET $3")
    total_sql = "SELECT live FROM agent_counts WHERE organization_id = $1"
    insert_sql = f"INSERT INTO calls ({insert_columns}) VALUES ({', '.join(f'${n}' for n in range(1, 17))})"

    async def connect() -> None:
        pool["pool"] = await asyncpg.create_pool(dsn, min_size=2, max_size=10)

    async def close() -> None:
        await pool["pool"].close()

    @get("/agents")
    async def list_agents_pg(limit: int = 25, offset: int = 0) -> Response[bytes]:
        async with pool["pool"].acquire() as conn:
            rows = await conn.fetch(list_sql, organization, limit, offset)
            # the total rides on every row; an empty page asks for it alone
            total = (rows[0]["total"] if rows else await conn.fetchval(total_sql, organization)) or 0
        return page([tuple(r)[:-1] for r in rows], total, limit, offset)

    @post("/calls")
    async def create_call_pg(data: CallCreate) -> Response[bytes]:
        now, call_id = datetime.now(UTC), str(uuid.uuid4())
        async with pool["pool"].acquire() as conn:
            await conn.execute(insert_sql, call_id, organization, int(data.bot_id), data.destination_phone, CALLER,
                               data.contact_name, encode(data.custom_data).decode(), PROMPT, 600, "queued", "{}",
                               now + timedelta(minutes=10), now, now, 100, now)
        return created(call_id, data, now)

    return Litestar(route_handlers=[list_agents_pg, create_call_pg], on_startup=[connect], on_shutdown=[close],
                    debug=False, logging_config=None, openapi_config=None)


# --- serving ----------------------------------------------------------------------------------------------------


def serve(app: str, server: str, loop: str, port: int) -> None:
    here = Path(__file__).resolve().parent
    factory = {"fastapi": "peers:make_fastapi", "raw": "peers:make_raw"}[app]
    if server == "granian":
        from granian import Granian
        from granian.constants import Interfaces, Loops

        Granian(factory, address="127.0.0.1", port=port, workers=1, interface=Interfaces.ASGI, factory=True,
                working_dir=here, log_access=False, loop=Loops.uvloop if loop == "uvloop" else Loops.auto).serve()
    else:
        import uvicorn

        uvicorn.run(factory, factory=True, host="127.0.0.1", port=port, workers=1, app_dir=str(here),
                    log_level="warning", access_log=False, lifespan="on",
                    loop="uvloop" if loop == "uvloop" else "auto", http="auto")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--app", choices=["fastapi", "raw"], required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--organization", type=int, default=1)
    parser.add_argument("--server", choices=["uvicorn", "granian"], default=None,
                        help="default: uvicorn for fastapi (with uvloop and httptools), granian for raw")
    parser.add_argument("--loop", choices=["auto", "uvloop"], default=None,
                        help="default: uvloop for fastapi, auto for raw")
    parser.add_argument("--port", type=int, default=8200)
    args = parser.parse_args(argv)
    os.environ[URL_ENV] = args.database_url
    os.environ[ORG_ENV] = str(args.organization)
    server = args.server or ("uvicorn" if args.app == "fastapi" else "granian")
    loop = args.loop or ("uvloop" if args.app == "fastapi" else "auto")
    serve(args.app, server, loop, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())

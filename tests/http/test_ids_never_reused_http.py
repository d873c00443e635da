"""Ids handed to clients are never reused, on either database: create, hard-delete the newest row, create
again, and the new id is larger. Plus the schema: every integer-id table on SQLite is AUTOINCREMENT."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import sqlalchemy as sa

from adapters.sql.engine import create_engine
from adapters.sql.metadata import metadata
from adapters.sql.schema import load_all_tables
from tests.support.apps import Api, Tenant

_NUMBERS = itertools.count(300)

async def _agent(api: Api, t: Tenant) -> int:
    return int((await api.client.post("/v2/agents", json={"name": "A"}, headers=t.headers)).json()["data"]["id"])


async def _kb(api: Api, t: Tenant) -> int:
    created = await api.client.post("/v2/knowledge-bases", json={"name": "KB", "agent_id": await _agent(api, t)},
                                    headers=t.headers)
    return int(created.json()["data"]["id"])


async def _calendar(api: Api, t: Tenant) -> int:
    created = await api.client.post("/v2/scheduling/calendars", json={"name": "C", "timezone": "UTC"},
                                    headers=t.headers)
    return int(created.json()["data"]["id"])


async def _create(api: Api, t: Tenant, kind: str, parent: int | None) -> tuple[int, str]:
    """(new id, the path that deletes it)."""
    c = api.client
    if kind == "documents":
        r = await c.post(f"/v2/knowledge-bases/{parent}/documents", headers=t.headers,
                         files=[("files", (f"{uuid.uuid4().hex}.txt", uuid.uuid4().hex.encode() + b" words here",
                                           "text/plain"))])
        assert r.status_code == 201, r.text
        doc_id = int(r.json()["data"]["documents"][0]["document_id"])
        return doc_id, f"/v2/knowledge-bases/{parent}/documents/{doc_id}"
    path, body = {
        "webhooks": ("/v2/webhooks", {"url": "https://hooks.example.com/parley", "events": ["call.ended"]}),
        "dnc_lists": ("/v2/dnc/lists", {"name": "DNC"}),
        "knowledge_bases": ("/v2/knowledge-bases", {"name": "KB", "agent_id": parent}),
        "availability_rules": (f"/v2/scheduling/calendars/{parent}/rules",
                               {"weekday": 0, "start_time": "09:00", "end_time": "10:00"}),
        "blackouts": (f"/v2/scheduling/calendars/{parent}/blackouts",
                      {"start": "2030-01-01T10:00:00Z", "end": "2030-01-01T11:00:00Z"}),
        "telephony_providers": ("/v2/telephony/providers", {"name": "SIP", "type": "sip"}),
        "telephony_numbers": ("/v2/telephony/phone-numbers", {"phone_number": f"+1415556{next(_NUMBERS):04d}"}),
    }[kind]
    r = await c.post(path, json=body, headers=t.headers)
    assert r.status_code == 201, r.text
    new_id = int(r.json()["data"]["id"])
    return new_id, f"{path.split('?')[0]}/{new_id}"


_PARENTS: dict[str, Callable[[Api, Tenant], Awaitable[int]] | None] = {
    "documents": _kb,
    "webhooks": None,
    "dnc_lists": None,
    "knowledge_bases": _agent,
    "availability_rules": _calendar,
    "blackouts": _calendar,
    "telephony_providers": None,
    "telephony_numbers": None,
}


@pytest.mark.parametrize("kind", list(_PARENTS))
async def test_a_hard_deleted_id_is_never_handed_out_again(any_api: Api, kind: str) -> None:
    t = await any_api.tenant()
    make_parent = _PARENTS[kind]
    parent = await make_parent(any_api, t) if make_parent else None
    first, delete_path = await _create(any_api, t, kind, parent)
    deleted = await any_api.client.delete(delete_path, headers=t.headers)
    assert deleted.status_code == 204, deleted.text
    second, _ = await _create(any_api, t, kind, parent)
    assert second > first, f"{kind}: id {first} was deleted and {second} handed out next"


def _integer_id_tables() -> list[sa.Table]:
    load_all_tables()
    return [t for t in metadata.tables.values()
            if "id" in t.c and t.c.id.primary_key and isinstance(t.c.id.type.as_generic(), sa.Integer)]


def test_every_integer_id_table_is_declared_autoincrement_on_sqlite() -> None:
    tables = _integer_id_tables()
    assert len(tables) >= 21
    missing = [t.name for t in tables if not t.dialect_options["sqlite"]["autoincrement"]]
    assert missing == []


async def test_every_integer_id_table_of_the_migrated_sqlite_schema_is_autoincrement(sqlite_url: str) -> None:
    engine = create_engine(sqlite_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.text(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE '%id INTEGER%'"))).all()
            info: dict[str, Any] = {}
            for name, sql in rows:
                columns = (await conn.execute(sa.text(f'PRAGMA table_info("{name}")'))).all()
                info[name] = (sql, [c for c in columns if c[1] == "id" and c[5] == 1 and c[2].upper() == "INTEGER"])
            fts = (await conn.execute(sa.text(
                "SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'"))).scalars().all()
    finally:
        await engine.dispose()
    # the full-text index's shadow tables are SQLite's own, keyed by the chunks' ids
    integer_ids = {name: sql for name, (sql, id_pk) in info.items()
                   if id_pk and not any(name.startswith(f"{v}_") for v in fts)}
    assert set(integer_ids) >= {t.name for t in _integer_id_tables()}
    assert [name for name, sql in integer_ids.items() if "AUTOINCREMENT" not in sql.upper()] == []

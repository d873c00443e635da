"""SQL repositories for organizations, API keys, users and idempotency records (rate limits:
``adapters/sql/rate_limits.py``)."""

from __future__ import annotations

import builtins
import time
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from adapters.sql.dialect import insert
from adapters.sql.tables import api_keys, idempotency_keys, organizations, user_links, users
from adapters.sql.uow import SqlUnitOfWork
from application.ports.platform import Page, PageRequest
from domain.api_keys import ApiKey
from domain.destinations import DEFAULT_DIALING_POLICY, DialingPolicy, policy_from_json
from domain.idempotency import IdempotencyRecord, StoredResponse
from domain.organizations import Organization
from domain.roles import Role
from domain.users import LinkKind, OneTimeLink, UserAccount

ORG_COLUMNS = [organizations.c[n] for n in ("id", "name", "plan", "org_type", "parent_id", "created_at",
                                              "updated_at", "dialing_policy", "mfa_required")]


def org_from_row(row: Any) -> Organization:
    return Organization(row.id, row.name, row.plan, row.org_type, row.parent_id, row.created_at, row.updated_at,
                        policy_from_json(row.dialing_policy), bool(row.mfa_required))


def _stored_policy(policy: DialingPolicy) -> dict[str, Any] | None:
    return None if policy == DEFAULT_DIALING_POLICY else policy.view()


_ORG_QUERY = sa.select(*ORG_COLUMNS).where(organizations.c.id == sa.bindparam("org"),
                                            organizations.c.deleted_at.is_(None))


class SqlOrganizationRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, org: Organization) -> Organization:
        conn = await self.uow.connection()
        result = await conn.execute(
            organizations.insert().returning(organizations.c.id),
            {"name": org.name, "plan": org.plan, "org_type": org.org_type, "parent_id": org.parent_id,
             "created_at": org.created_at, "updated_at": org.updated_at,
             "dialing_policy": _stored_policy(org.dialing_policy)},
        )
        return replace(org, id=result.scalar_one())

    async def get(self, org_id: int) -> Organization | None:
        """Read once per transaction (``SqlUnitOfWork.read_once``): a call placed asks twice (destinations, quota)."""
        kept = self.uow.read_once
        if ("organization", org_id) in kept:
            found: Organization | None = kept["organization", org_id]
            return found
        conn = await self.uow.connection()
        row = (await conn.execute(_ORG_QUERY, {"org": org_id})).first()
        found = kept["organization", org_id] = org_from_row(row) if row else None
        return found

    async def list_children(self, parent_id: int, page: PageRequest) -> Page[Organization]:
        conn = await self.uow.connection()
        where = sa.and_(organizations.c.parent_id == parent_id, organizations.c.deleted_at.is_(None))
        total = (await conn.execute(sa.select(sa.func.count()).select_from(organizations).where(where))).scalar_one()
        rows = await conn.execute(
            sa.select(*ORG_COLUMNS).where(where).order_by(organizations.c.id).limit(page.limit).offset(page.offset)
        )
        return Page([org_from_row(r) for r in rows], total, page.limit, page.offset)

    async def update(self, org: Organization) -> Organization:
        conn = await self.uow.connection()
        self.uow.read_once.pop(("organization", org.id), None)
        CREDENTIALS.forget_organization(self.uow, org.id)
        await conn.execute(
            organizations.update().where(organizations.c.id == org.id)
            .values(name=org.name, plan=org.plan, updated_at=org.updated_at,
                    dialing_policy=_stored_policy(org.dialing_policy))
        )
        return org

    async def set_mfa_required(self, org_id: int, required: bool) -> None:
        conn = await self.uow.connection()
        CREDENTIALS.forget_organization(self.uow, org_id)
        await conn.execute(organizations.update().where(organizations.c.id == org_id).values(mfa_required=required))

    async def delete(self, org_id: int, at: datetime) -> None:
        conn = await self.uow.connection()
        self.uow.read_once.pop(("organization", org_id), None)
        CREDENTIALS.forget_organization(self.uow, org_id)
        await conn.execute(organizations.update().where(organizations.c.id == org_id).values(deleted_at=at))


_KEY_COLUMNS = [api_keys.c[n] for n in ("id", "organization_id", "name", "prefix", "last_four", "key_hash", "scopes",
                                         "status", "created_at", "expires_at", "last_used_at", "lineage_id",
                                         "rotated_to_id")]


def _key(row: Any) -> ApiKey:
    return ApiKey(row.id, row.organization_id, row.name, row.prefix, row.last_four, row.key_hash,
                  tuple(row.scopes), row.status, row.created_at, row.expires_at, row.last_used_at,
                  row.lineage_id, row.rotated_to_id)


# authentication's lookup, built once: the key by its hash, with its organization unless that is deleted
_CREDENTIAL_QUERY = (
    sa.select(*_KEY_COLUMNS, *[c.label(f"org_{c.name}") for c in ORG_COLUMNS])
    .join(organizations, organizations.c.id == api_keys.c.organization_id)
    .where(api_keys.c.key_hash == sa.bindparam("key_hash"), organizations.c.deleted_at.is_(None))
)


class CredentialCache:
    """This process's recent answers of ``find_credential`` (found keys only), for at most ``ttl`` seconds of
    monotonic time, per database.

    Every write through these repositories to a key or an organization (update, revoke, rotate, delete, plan
    change) drops the affected entries at once, so a change made in this process applies to the next request.
    A change made by another process (a second server worker, the CLI) reaches this one within ``ttl``: a revoked
    key or a deleted organization keeps working here for at most that long. Expiry is never cached: the caller
    checks ``expires_at`` against its clock on every request.
    """

    def __init__(self, ttl: float = 1.0, max_entries: int = 10_000) -> None:
        self.ttl, self.max_entries = ttl, max_entries
        self._entries: dict[tuple[str, str], tuple[float, ApiKey, Organization]] = {}
        self._databases: dict[int, tuple[Any, str]] = {}

    def _database(self, uow: SqlUnitOfWork) -> str:
        url = uow.engine.url  # engines are few and long-lived: their URL's text is worked out once
        known = self._databases.get(id(url))
        if known is None or known[0] is not url:
            known = self._databases[id(url)] = (url, url.render_as_string(hide_password=True))
        return known[1]

    def get(self, uow: SqlUnitOfWork, key_hash: str) -> tuple[ApiKey, Organization] | None:
        entry = self._entries.get((self._database(uow), key_hash))
        if entry is None or time.monotonic() - entry[0] >= self.ttl:
            return None
        return entry[1], entry[2]

    def put(self, uow: SqlUnitOfWork, key_hash: str, key: ApiKey, org: Organization) -> None:
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[(self._database(uow), key_hash)] = (time.monotonic(), key, org)

    def _drop(self, uow: SqlUnitOfWork, matches: Any) -> None:
        database = self._database(uow)
        for cache_key in [k for k, (_, key, org) in self._entries.items() if k[0] == database and matches(key, org)]:
            del self._entries[cache_key]

    def forget_key(self, uow: SqlUnitOfWork, key_id: int | None) -> None:
        self._drop(uow, lambda key, _org: key.id == key_id)

    def forget_organization(self, uow: SqlUnitOfWork, org_id: int | None) -> None:
        self._drop(uow, lambda key, org: key.organization_id == org_id or org.id == org_id)

    def used(self, uow: SqlUnitOfWork, key_id: int, at: datetime) -> None:
        """``last_used_at`` moved: keep serving the entry, with the new time."""
        database = self._database(uow)
        for cache_key, (stamp, key, org) in list(self._entries.items()):
            if cache_key[0] == database and key.id == key_id:
                self._entries[cache_key] = (stamp, replace(key, last_used_at=at), org)

    def clear(self) -> None:
        self._entries.clear()


CREDENTIALS = CredentialCache()


class SqlApiKeyRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, key: ApiKey) -> ApiKey:
        conn = await self.uow.connection()
        new_id = (await conn.execute(
            api_keys.insert().returning(api_keys.c.id),
            {"organization_id": key.organization_id, "name": key.name, "prefix": key.prefix,
             "last_four": key.last_four, "key_hash": key.key_hash, "scopes": list(key.scopes),
             "status": key.status, "created_at": key.created_at, "expires_at": key.expires_at,
             "last_used_at": None, "lineage_id": key.lineage_id, "rotated_to_id": None},
        )).scalar_one()
        lineage = key.lineage_id or new_id
        if key.lineage_id is None:
            await conn.execute(api_keys.update().where(api_keys.c.id == new_id).values(lineage_id=lineage))
        return ApiKey(new_id, key.organization_id, key.name, key.prefix, key.last_four, key.key_hash, key.scopes,
                      key.status, key.created_at, key.expires_at, None, lineage, None)

    async def get(self, organization_id: int, key_id: int) -> ApiKey | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(*_KEY_COLUMNS).where(
            api_keys.c.id == key_id, api_keys.c.organization_id == organization_id))).first()
        return _key(row) if row else None

    async def find_credential(self, key_hash: str) -> tuple[ApiKey, Organization] | None:
        cached = CREDENTIALS.get(self.uow, key_hash)
        if cached is not None:
            return cached
        conn = await self.uow.connection()
        row = (await conn.execute(_CREDENTIAL_QUERY, {"key_hash": key_hash})).first()
        if row is None:
            return None
        org = Organization(row.org_id, row.org_name, row.org_plan, row.org_org_type, row.org_parent_id,
                           row.org_created_at, row.org_updated_at, policy_from_json(row.org_dialing_policy))
        key = _key(row)
        CREDENTIALS.put(self.uow, key_hash, key, org)
        return key, org

    async def list(self, organization_id: int, page: PageRequest) -> Page[ApiKey]:
        conn = await self.uow.connection()
        where = api_keys.c.organization_id == organization_id
        total = (await conn.execute(sa.select(sa.func.count()).select_from(api_keys).where(where))).scalar_one()
        rows = await conn.execute(sa.select(*_KEY_COLUMNS).where(where).order_by(api_keys.c.id)
                                  .limit(page.limit).offset(page.offset))
        return Page([_key(r) for r in rows], total, page.limit, page.offset)

    async def update(self, key: ApiKey) -> ApiKey:
        conn = await self.uow.connection()
        CREDENTIALS.forget_key(self.uow, key.id)
        await conn.execute(api_keys.update().where(api_keys.c.id == key.id).values(
            status=key.status, expires_at=key.expires_at, rotated_to_id=key.rotated_to_id, name=key.name))
        return key

    async def touch(self, key_id: int, at: datetime) -> None:
        conn = await self.uow.connection()
        await conn.execute(api_keys.update().where(api_keys.c.id == key_id).values(last_used_at=at))
        CREDENTIALS.used(self.uow, key_id, at)

    async def revoke_all(self, organization_id: int) -> None:
        conn = await self.uow.connection()
        CREDENTIALS.forget_organization(self.uow, organization_id)
        await conn.execute(api_keys.update().where(api_keys.c.organization_id == organization_id)
                           .values(status="revoked"))


class SqlUserRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, organization_id: int, email: str, password_hash: str, at: datetime,
                  role: str = "owner") -> int:
        conn = await self.uow.connection()
        return (await conn.execute(users.insert().returning(users.c.id), {
            "organization_id": organization_id, "email": email, "password_hash": password_hash, "created_at": at,
            "role": role,
        })).scalar_one()

    async def find_by_email(self, email: str) -> tuple[int, int, str] | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(users.c.id, users.c.organization_id, users.c.password_hash)
                                  .where(users.c.email == email))).first()
        return (row.id, row.organization_id, row.password_hash) if row else None

    async def get(self, user_id: int) -> tuple[int, int, str] | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(users.c.id, users.c.organization_id, users.c.email)
                                  .where(users.c.id == user_id))).first()
        return None if row is None else (int(row[0]), int(row[1]), str(row[2]))

    async def set_password_hash(self, user_id: int, password_hash: str) -> None:
        conn = await self.uow.connection()
        await conn.execute(users.update().where(users.c.id == user_id).values(password_hash=password_hash))

    async def account(self, user_id: int) -> UserAccount | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(*_ACCOUNT).where(users.c.id == user_id))).first()
        return _account(row) if row is not None else None

    async def list_in(self, organization_id: int) -> builtins.list[UserAccount]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(*_ACCOUNT).where(users.c.organization_id == organization_id)
                                  .order_by(users.c.id))
        return [_account(row) for row in rows]

    async def set_role(self, user_id: int, role: str) -> None:
        conn = await self.uow.connection()
        await conn.execute(users.update().where(users.c.id == user_id).values(role=role))

    async def delete(self, user_id: int) -> None:
        conn = await self.uow.connection()
        await conn.execute(users.delete().where(users.c.id == user_id))

    async def mfa_secret(self, user_id: int) -> str | None:
        conn = await self.uow.connection()
        return (await conn.execute(sa.select(users.c.totp_secret).where(users.c.id == user_id))).scalar()

    async def set_mfa(self, user_id: int, sealed_secret: str | None, at: datetime | None) -> None:
        conn = await self.uow.connection()
        await conn.execute(users.update().where(users.c.id == user_id)
                           .values(totp_secret=sealed_secret, mfa_enabled_at=at))


_ACCOUNT = (users.c.id, users.c.organization_id, users.c.email, users.c.role, users.c.created_at,
            users.c.mfa_enabled_at)


def _account(row: Any) -> UserAccount:
    return UserAccount(int(row.id), int(row.organization_id), str(row.email), Role(row.role), row.created_at,
                       row.mfa_enabled_at)


def _link(row: Any) -> OneTimeLink:
    return OneTimeLink(int(row.id), int(row.organization_id), LinkKind(row.kind), row.token_hash, row.email,
                       Role(row.role), row.user_id, row.created_by, row.created_at, row.expires_at, row.used_at)


class SqlUserLinkRepository:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def add(self, link: OneTimeLink) -> OneTimeLink:
        conn = await self.uow.connection()
        row = (await conn.execute(user_links.insert().returning(*user_links.c), {
            "organization_id": link.organization_id, "kind": str(link.kind), "token_hash": link.token_hash,
            "email": link.email, "role": str(link.role), "user_id": link.user_id, "created_by": link.created_by,
            "created_at": link.created_at, "expires_at": link.expires_at, "used_at": link.used_at})).one()
        return _link(row)

    async def find(self, token_hash: str, *, lock: bool = False) -> OneTimeLink | None:
        conn = await self.uow.connection()
        query = sa.select(user_links).where(user_links.c.token_hash == token_hash)
        if lock:
            query = query.with_for_update()
        row = (await conn.execute(query)).first()
        return _link(row) if row is not None else None

    async def mark_used(self, link_id: int, at: datetime) -> None:
        conn = await self.uow.connection()
        await conn.execute(user_links.update().where(user_links.c.id == link_id, user_links.c.used_at.is_(None))
                           .values(used_at=at))

    async def pending_invitations(self, organization_id: int, now: datetime) -> builtins.list[OneTimeLink]:
        conn = await self.uow.connection()
        rows = await conn.execute(sa.select(user_links).where(
            user_links.c.organization_id == organization_id, user_links.c.kind == str(LinkKind.INVITATION),
            user_links.c.used_at.is_(None), user_links.c.expires_at > now).order_by(user_links.c.id.desc()))
        return [_link(row) for row in rows]

    async def revoke(self, organization_id: int, link_id: int, at: datetime) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(user_links.update().where(
            user_links.c.organization_id == organization_id, user_links.c.id == link_id,
            user_links.c.used_at.is_(None)).values(used_at=at))
        return bool(result.rowcount)


def _record(row: Any) -> IdempotencyRecord:
    response = None
    if row.response_status is not None:
        headers = tuple((str(k), str(v)) for k, v in (row.response_headers or []))
        response = StoredResponse(row.response_status, headers, bytes(row.response_body or b""),
                                  bool(row.response_sealed))
    return IdempotencyRecord(row.organization_id, row.lineage_id, row.key, row.fingerprint, row.created_at,
                             row.locked_at, row.token, response)


_ik = idempotency_keys.c
_CLAIM_WHERE = sa.and_(_ik.organization_id == sa.bindparam("org"), _ik.lineage_id == sa.bindparam("lineage"),
                       _ik.key == sa.bindparam("idem_key"), _ik.token == sa.bindparam("claim_token"))
# a write request's claim and its completion, built once with bound parameters (the claim per dialect)
_CLAIMS = {dialect: insert(idempotency_keys, dialect).values(
    organization_id=sa.bindparam("org"), lineage_id=sa.bindparam("lineage"), key=sa.bindparam("idem_key"),
    fingerprint=sa.bindparam("claim_fingerprint"), token=sa.bindparam("claim_token"),
    created_at=sa.bindparam("claim_created_at"), locked_at=sa.bindparam("claim_locked_at"),
).on_conflict_do_nothing(index_elements=["organization_id", "lineage_id", "key"]).returning(_ik.key)
    for dialect in ("sqlite", "postgresql")}
_COMPLETE = idempotency_keys.update().where(_CLAIM_WHERE).values(
    locked_at=None, response_status=sa.bindparam("status"), response_headers=sa.bindparam("headers"),
    response_body=sa.bindparam("body"), response_sealed=sa.bindparam("sealed"))


class SqlIdempotencyStore:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    def _where(self, organization_id: int, lineage_id: int, key: str) -> Any:
        return sa.and_(idempotency_keys.c.organization_id == organization_id,
                       idempotency_keys.c.lineage_id == lineage_id, idempotency_keys.c.key == key)

    async def get(self, organization_id: int, lineage_id: int, key: str) -> IdempotencyRecord | None:
        conn = await self.uow.connection()
        row = (await conn.execute(sa.select(idempotency_keys).where(
            self._where(organization_id, lineage_id, key)))).first()
        return _record(row) if row else None

    async def insert_if_absent(self, record: IdempotencyRecord) -> bool:
        conn = await self.uow.connection()
        return (await conn.execute(_CLAIMS[self.uow.dialect], {
            "org": record.organization_id, "lineage": record.lineage_id, "idem_key": record.key,
            "claim_fingerprint": record.fingerprint, "claim_token": record.token,
            "claim_created_at": record.created_at, "claim_locked_at": record.locked_at})).first() is not None

    async def take_over(self, previous: IdempotencyRecord, record: IdempotencyRecord) -> bool:
        conn = await self.uow.connection()
        result = await conn.execute(
            idempotency_keys.update()
            .where(self._where(previous.organization_id, previous.lineage_id, previous.key),
                   idempotency_keys.c.token == previous.token)
            .values(fingerprint=record.fingerprint, token=record.token, created_at=record.created_at,
                    locked_at=record.locked_at, response_status=None, response_headers=None, response_body=None,
                    response_sealed=False)
        )
        return result.rowcount == 1

    async def complete(self, organization_id: int, lineage_id: int, key: str, token: str,
                       response: StoredResponse) -> None:
        conn = await self.uow.connection()
        await conn.execute(_COMPLETE, {
            "org": organization_id, "lineage": lineage_id, "idem_key": key, "claim_token": token,
            "status": response.status, "headers": [list(h) for h in response.headers], "body": response.body,
            "sealed": response.sealed})

    async def release(self, organization_id: int, lineage_id: int, key: str, token: str) -> None:
        conn = await self.uow.connection()
        await conn.execute(idempotency_keys.delete().where(self._where(organization_id, lineage_id, key),
                                                           idempotency_keys.c.token == token))

    async def purge_expired(self, before: datetime) -> int:
        conn = await self.uow.connection()
        result = await conn.execute(idempotency_keys.delete().where(idempotency_keys.c.created_at < before))
        return result.rowcount or 0

"""In-memory organizations, API keys, users, idempotency records and rate limits."""

from __future__ import annotations

import builtins
from dataclasses import replace
from datetime import datetime
from typing import Any

from adapters.memory.store import InMemoryUnitOfWork
from application.ports.platform import Page, PageRequest
from domain.api_keys import ApiKey
from domain.idempotency import IdempotencyRecord, StoredResponse
from domain.identity import persisted
from domain.organizations import Organization
from domain.rate_limit import RateLimitDecision, Window, WindowState
from domain.roles import Role
from domain.users import LinkKind, OneTimeLink, UserAccount


class InMemoryOrganizationRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, org: Organization) -> Organization:
        tables = await self.uow.tables()
        stored = replace(org, id=self.uow.store.next_id("organizations"))
        tables["organizations"][stored.id] = (stored, None)
        return stored

    async def get(self, org_id: int) -> Organization | None:
        tables = await self.uow.tables()
        entry = tables["organizations"].get(org_id)
        return entry[0] if entry and entry[1] is None else None

    async def list_children(self, parent_id: int, page: PageRequest) -> Page[Organization]:
        tables = await self.uow.tables()
        children = [o for o, deleted in sorted(tables["organizations"].values(), key=lambda e: e[0].id)
                    if o.parent_id == parent_id and deleted is None]
        return page.slice(children)

    async def update(self, org: Organization) -> Organization:
        tables = await self.uow.tables()
        kept = tables["organizations"].get(org.id)
        required = kept[0].mfa_required if kept else org.mfa_required  # set_mfa_required's own
        tables["organizations"][org.id] = (replace(org, mfa_required=required), None)
        return org

    async def set_mfa_required(self, org_id: int, required: bool) -> None:
        tables = await self.uow.tables()
        org, deleted = tables["organizations"][org_id]
        tables["organizations"][org_id] = (replace(org, mfa_required=required), deleted)

    async def delete(self, org_id: int, at: datetime) -> None:
        tables = await self.uow.tables()
        org, _ = tables["organizations"][org_id]
        tables["organizations"][org_id] = (org, at)


class InMemoryApiKeyRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, key: ApiKey) -> ApiKey:
        tables = await self.uow.tables()
        new_id = self.uow.store.next_id("api_keys")
        stored = replace(key, id=new_id, lineage_id=key.lineage_id or new_id)
        if any(k.key_hash == key.key_hash for k in tables["api_keys"].values()):
            raise ValueError("duplicate key hash")
        tables["api_keys"][new_id] = stored
        return stored

    async def get(self, organization_id: int, key_id: int) -> ApiKey | None:
        tables = await self.uow.tables()
        key = tables["api_keys"].get(key_id)
        return key if key and key.organization_id == organization_id else None

    async def find_credential(self, key_hash: str) -> tuple[ApiKey, Organization] | None:
        tables = await self.uow.tables()
        for key in tables["api_keys"].values():
            if key.key_hash == key_hash:
                org, deleted = tables["organizations"][key.organization_id]
                return (key, org) if deleted is None else None
        return None

    async def list(self, organization_id: int, page: PageRequest) -> Page[ApiKey]:
        tables = await self.uow.tables()
        keys = sorted((k for k in tables["api_keys"].values() if k.organization_id == organization_id),
                      key=lambda k: k.id)
        return page.slice(keys)

    async def update(self, key: ApiKey) -> ApiKey:
        tables = await self.uow.tables()
        current = tables["api_keys"][key.id]
        tables["api_keys"][key.id] = replace(current, status=key.status, expires_at=key.expires_at,
                                             rotated_to_id=key.rotated_to_id, name=key.name)
        return key

    async def touch(self, key_id: int, at: datetime) -> None:
        tables = await self.uow.tables()
        tables["api_keys"][key_id] = replace(tables["api_keys"][key_id], last_used_at=at)

    async def revoke_all(self, organization_id: int) -> None:
        tables = await self.uow.tables()
        for key_id, key in list(tables["api_keys"].items()):
            if key.organization_id == organization_id:
                tables["api_keys"][key_id] = replace(key, status="revoked")


class InMemoryUserRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def add(self, organization_id: int, email: str, password_hash: str, at: datetime,
                  role: str = "owner") -> int:
        tables = await self.uow.tables()
        if email in tables["users"]:
            raise ValueError("duplicate email")
        user_id = self.uow.store.next_id("users")
        tables["users"][email] = (user_id, organization_id, password_hash)
        tables["user_roles"][user_id] = (Role(role), at)
        return user_id

    async def mfa_secret(self, user_id: int) -> str | None:
        return (await self.uow.tables())["user_mfa"].get(user_id, (None, None))[0]

    async def set_mfa(self, user_id: int, sealed_secret: str | None, at: datetime | None) -> None:
        (await self.uow.tables())["user_mfa"][user_id] = (sealed_secret, at)

    async def find_by_email(self, email: str) -> tuple[int, int, str] | None:
        tables = await self.uow.tables()
        return tables["users"].get(email)

    async def get(self, user_id: int) -> tuple[int, int, str] | None:
        tables = await self.uow.tables()
        return next(((uid, org, email) for email, (uid, org, _) in tables["users"].items() if uid == user_id), None)

    async def set_password_hash(self, user_id: int, password_hash: str) -> None:
        tables = await self.uow.tables()
        for email, (uid, org, _) in list(tables["users"].items()):
            if uid == user_id:
                tables["users"][email] = (uid, org, password_hash)

    async def account(self, user_id: int) -> UserAccount | None:
        return next((a for a in await self._accounts() if a.id == user_id), None)

    async def _accounts(self) -> builtins.list[UserAccount]:
        tables = await self.uow.tables()
        found = []
        for email, (uid, org, _) in tables["users"].items():
            role, at = tables["user_roles"].get(uid, (Role.OWNER, None))
            found.append(UserAccount(uid, org, email, role, at, tables["user_mfa"].get(uid, (None, None))[1]))
        return sorted(found, key=lambda a: a.id)

    async def list_in(self, organization_id: int) -> builtins.list[UserAccount]:
        return [a for a in await self._accounts() if a.organization_id == organization_id]

    async def set_role(self, user_id: int, role: str) -> None:
        tables = await self.uow.tables()
        _, at = tables["user_roles"].get(user_id, (Role.OWNER, None))
        tables["user_roles"][user_id] = (Role(role), at)

    async def delete(self, user_id: int) -> None:
        tables = await self.uow.tables()
        for email, (uid, _, _) in list(tables["users"].items()):
            if uid == user_id:
                del tables["users"][email]
        tables["user_roles"].pop(user_id, None)


class InMemoryUserLinkRepository:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def _all(self) -> dict[Any, OneTimeLink]:
        return (await self.uow.tables())["user_links"]

    async def add(self, link: OneTimeLink) -> OneTimeLink:
        table = await self._all()
        if any(other.token_hash == link.token_hash for other in table.values()):
            raise ValueError("duplicate token")
        stored = replace(link, id=self.uow.store.next_id("user_links"))
        table[stored.id] = stored
        return stored

    async def find(self, token_hash: str, *, lock: bool = False) -> OneTimeLink | None:
        return next((link for link in (await self._all()).values() if link.token_hash == token_hash), None)

    async def mark_used(self, link_id: int, at: datetime) -> None:
        table = await self._all()
        if link_id in table and table[link_id].used_at is None:
            table[link_id] = replace(table[link_id], used_at=at)

    async def pending_invitations(self, organization_id: int, now: datetime) -> builtins.list[OneTimeLink]:
        return sorted((link for link in (await self._all()).values() if link.organization_id == organization_id
                       and link.kind == LinkKind.INVITATION and link.usable(now)),
                      key=lambda link: -persisted(link.id))

    async def revoke(self, organization_id: int, link_id: int, at: datetime) -> bool:
        table = await self._all()
        link = table.get(link_id)
        if link is None or link.organization_id != organization_id or link.used_at is not None:
            return False
        table[link_id] = replace(link, used_at=at)
        return True


def _slot(record: IdempotencyRecord) -> tuple[int, int, str]:
    return record.organization_id, record.lineage_id, record.key


class InMemoryIdempotencyStore:
    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self.uow = uow

    async def get(self, organization_id: int, lineage_id: int, key: str) -> IdempotencyRecord | None:
        return (await self.uow.tables())["idempotency"].get((organization_id, lineage_id, key))

    async def insert_if_absent(self, record: IdempotencyRecord) -> bool:
        table = (await self.uow.tables())["idempotency"]
        if _slot(record) in table:
            return False
        table[_slot(record)] = record
        return True

    async def take_over(self, previous: IdempotencyRecord, record: IdempotencyRecord) -> bool:
        table = (await self.uow.tables())["idempotency"]
        current = table.get(_slot(previous))
        if current is None or current.token != previous.token:
            return False
        table[_slot(record)] = record
        return True

    async def complete(self, organization_id: int, lineage_id: int, key: str, token: str,
                       response: StoredResponse) -> None:
        table, slot = (await self.uow.tables())["idempotency"], (organization_id, lineage_id, key)
        current = table.get(slot)
        if current is not None and current.token == token:
            table[slot] = replace(current, locked_at=None, response=response)

    async def release(self, organization_id: int, lineage_id: int, key: str, token: str) -> None:
        table, slot = (await self.uow.tables())["idempotency"], (organization_id, lineage_id, key)
        current = table.get(slot)
        if current is not None and current.token == token:
            del table[slot]

    async def purge_expired(self, before: datetime) -> int:
        table = (await self.uow.tables())["idempotency"]
        stale = [k for k, r in table.items() if r.created_at < before]
        for k in stale:
            del table[k]
        return len(stale)


class InMemoryRateLimiter:
    """Single-process counters (the default when one process serves)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, int, int], int] = {}
        self._sweep_at = 0.0

    async def hit(self, bucket: str, windows: tuple[Window, ...], now: datetime) -> RateLimitDecision:
        return (await self.hit_all([(bucket, windows)], now))[0]

    async def hit_all(self, buckets: list[tuple[str, tuple[Window, ...]]], now: datetime) -> list[RateLimitDecision]:
        epoch = now.timestamp()
        self._sweep(epoch)
        slots = [[(w, (bucket, w.seconds, w.start(epoch))) for w in windows] for bucket, windows in buckets]
        free = [all(self._counts.get(slot, 0) < w.limit for w, slot in of_bucket) for of_bucket in slots]
        if all(free):
            for of_bucket in slots:
                for _, slot in of_bucket:
                    self._counts[slot] = self._counts.get(slot, 0) + 1
        return [RateLimitDecision.from_states([WindowState(w, self._counts.get(slot, 0), w.end(epoch))
                                               for w, slot in of_bucket], allowed, epoch)
                for of_bucket, allowed in zip(slots, free, strict=True)]

    async def peek(self, bucket: str, windows: tuple[Window, ...], now: datetime) -> RateLimitDecision:
        epoch = now.timestamp()
        states = [WindowState(w, self._counts.get((bucket, w.seconds, w.start(epoch)), 0), w.end(epoch))
                  for w in windows]
        return RateLimitDecision.from_states(states, all(s.used < s.window.limit for s in states), epoch)

    async def release(self, bucket: str, windows: tuple[Window, ...], at: datetime) -> None:
        epoch = at.timestamp()
        for window in windows:
            slot = (bucket, window.seconds, window.start(epoch))
            if self._counts.get(slot, 0) > 0:
                self._counts[slot] -= 1

    async def purge(self, before: datetime) -> int:
        epoch = before.timestamp()
        stale = [k for k in self._counts if k[2] + k[1] < epoch]
        for k in stale:
            del self._counts[k]
        return len(stale)

    def _sweep(self, epoch: float) -> None:
        if epoch < self._sweep_at:
            return
        self._sweep_at = epoch + 60
        self._counts = {k: v for k, v in self._counts.items() if k[2] + k[1] > epoch}

"""Ports for organizations, API keys, dashboard users, idempotency and rate limits."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.api_keys import ApiKey
from domain.idempotency import IdempotencyRecord, StoredResponse
from domain.organizations import Organization
from domain.rate_limit import RateLimitDecision, Window
from domain.users import OneTimeLink, UserAccount


class OrganizationRepository(Protocol):
    async def add(self, org: Organization) -> Organization: ...

    async def get(self, org_id: int) -> Organization | None: ...

    async def list_children(self, parent_id: int, page: PageRequest) -> Page[Organization]: ...

    async def update(self, org: Organization) -> Organization: ...

    async def set_mfa_required(self, org_id: int, required: bool) -> None: ...

    async def delete(self, org_id: int, at: datetime) -> None:
        """Soft delete: the organization and everything it owns stop being reachable."""
        ...


class ApiKeyRepository(Protocol):
    async def add(self, key: ApiKey) -> ApiKey: ...

    async def get(self, organization_id: int, key_id: int) -> ApiKey | None: ...

    async def find_credential(self, key_hash: str) -> tuple[ApiKey, Organization] | None:
        """The key with its (not deleted) organization. The only lookup not filtered by
        organization: authentication itself."""
        ...

    async def revoke_all(self, organization_id: int) -> None: ...

    async def list(self, organization_id: int, page: PageRequest) -> Page[ApiKey]: ...

    async def update(self, key: ApiKey) -> ApiKey: ...

    async def touch(self, key_id: int, at: datetime) -> None: ...


class UserRepository(Protocol):
    async def add(self, organization_id: int, email: str, password_hash: str, at: datetime,
                  role: str = "owner") -> int: ...

    async def find_by_email(self, email: str) -> tuple[int, int, str] | None:
        """(user id, organization id, password hash)."""
        ...

    async def get(self, user_id: int) -> tuple[int, int, str] | None:
        """(user id, organization id, email)."""
        ...

    async def set_password_hash(self, user_id: int, password_hash: str) -> None: ...

    async def account(self, user_id: int) -> UserAccount | None: ...

    async def list_in(self, organization_id: int) -> list[UserAccount]:
        """The organization's users, oldest first."""
        ...

    async def set_role(self, user_id: int, role: str) -> None: ...

    async def delete(self, user_id: int) -> None:
        """The user (its sessions are ended by the caller first)."""
        ...

    async def mfa_secret(self, user_id: int) -> str | None:
        """The sealed TOTP secret (enrolled or being enrolled), None when there is none."""
        ...

    async def set_mfa(self, user_id: int, sealed_secret: str | None, at: datetime | None) -> None:
        """Keep ``sealed_secret``; ``at``: two-factor sign-in on since then (None: not on yet, or off)."""
        ...


class UserLinkRepository(Protocol):
    """Invitations and password resets (``domain/users.py``)."""

    async def add(self, link: OneTimeLink) -> OneTimeLink: ...

    async def find(self, token_hash: str, *, lock: bool = False) -> OneTimeLink | None: ...

    async def mark_used(self, link_id: int, at: datetime) -> None: ...

    async def pending_invitations(self, organization_id: int, now: datetime) -> list[OneTimeLink]:
        """Invitations not used and not expired, newest first."""
        ...

    async def revoke(self, organization_id: int, link_id: int, at: datetime) -> bool:
        """An invitation or reset made unusable (marked used); False when there is none to revoke."""
        ...


class IdempotencyStore(Protocol):
    """Durable idempotency records, scoped to (organization, API-key lineage, key)."""

    async def get(self, organization_id: int, lineage_id: int, key: str) -> IdempotencyRecord | None: ...

    async def insert_if_absent(self, record: IdempotencyRecord) -> bool:
        """Atomically claim a new key; False when a record already exists."""
        ...

    async def take_over(self, previous: IdempotencyRecord, record: IdempotencyRecord) -> bool:
        """Replace an expired or stale record, only if it is still ``previous``."""
        ...

    async def complete(self, organization_id: int, lineage_id: int, key: str, token: str,
                       response: StoredResponse) -> None: ...

    async def release(self, organization_id: int, lineage_id: int, key: str, token: str) -> None: ...

    async def purge_expired(self, before: datetime) -> int: ...


class RateLimiter(Protocol):
    async def hit(self, bucket: str, windows: tuple[Window, ...], now: datetime) -> RateLimitDecision:
        """Count one request in every window unless one is exhausted (then count nothing), in the caller's
        transaction: the counts are shared once the caller commits."""
        ...

    async def hit_all(self, buckets: list[tuple[str, tuple[Window, ...]]], now: datetime) -> list[RateLimitDecision]:
        """``hit`` for one request in several buckets at once (a key's and its organization's): counted in every
        window of every bucket unless one is exhausted (then counted in none). One decision per bucket, in order:
        a bucket's decision is refused when one of its own windows is exhausted."""
        ...

    async def peek(self, bucket: str, windows: tuple[Window, ...], now: datetime) -> RateLimitDecision:
        """What ``hit`` would decide now, counting nothing."""
        ...

    async def release(self, bucket: str, windows: tuple[Window, ...], at: datetime) -> None:
        """Give back one request ``hit`` counted at ``at`` in every window (never below zero): a slot taken
        before the work it guards turned out not to need it (a sign-in that succeeded). In the caller's
        transaction, as ``hit`` is: the caller commits."""
        ...

    async def purge(self, before: datetime) -> int:
        """Forget windows that ended before ``before``."""
        ...

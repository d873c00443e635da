"""Port of the audit log (``domain/audit.py``): append, list an organization's events, purge the old ones."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from application.ports.platform import Page, PageRequest
from domain.audit import ActorType, AuditEvent


@dataclass(frozen=True, slots=True)
class AuditFilter:
    actor_type: ActorType | None = None
    actor_id: int | None = None
    action: str | None = None
    resource_type: str | None = None
    resource_id: str | None = None
    created_after: datetime | None = None
    """At or after."""
    created_before: datetime | None = None
    """Strictly before."""


class AuditLog(Protocol):
    """Writes run in the caller's transaction (the handler's, when the change it records was carried out)."""

    async def add(self, event: AuditEvent) -> AuditEvent:
        """The event stored, with its id."""
        ...

    async def list(self, organization_id: int, filters: AuditFilter, page: PageRequest) -> Page[AuditEvent]:
        """The organization's events that match, newest first (``created_at``, then ``id``, descending)."""
        ...

    async def purge(self, before: datetime) -> int:
        """Delete every organization's events created before ``before``; how many went."""
        ...

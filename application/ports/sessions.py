"""Port for dashboard sessions, stored where every server process sees them."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from domain.sessions import Session


class SessionStore(Protocol):
    async def add(self, session: Session) -> None: ...

    async def get(self, id_hash: str) -> Session | None: ...

    async def touch(self, id_hash: str, at: datetime) -> None:
        """Record the session's last use."""
        ...

    async def delete(self, id_hash: str) -> None: ...

    async def verified(self, id_hash: str, at: datetime) -> None:
        """Its user gave the password or a code again at ``at``."""
        ...

    async def act_as(self, id_hash: str, organization_id: int | None) -> None:
        """The session works in ``organization_id`` from now on (None: its user's own organization)."""
        ...

    async def list_for_user(self, user_id: int) -> list[Session]:
        """The user's sessions, newest first (expired ones included until purged)."""
        ...

    async def delete_for_user(self, user_id: int, *, keep: str | None = None) -> int:
        """Ends every session of the user (but ``keep``, an id hash); how many."""
        ...

    async def purge(self, idle_before: datetime, created_before: datetime) -> int:
        """Forget sessions last used before ``idle_before`` or opened before ``created_before``."""
        ...

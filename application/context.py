"""Who is acting: the organization a request works in and the key that made it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from domain.scopes import ScopeSet


@dataclass(frozen=True, slots=True)
class ApiBaseUrl:
    """Where the client reaches the API, prefix included (``https://api.example.com/v2``): the base of
    the links Parley hands out (signed recording URLs, calendar feed URLs)."""

    url: str

    def link(self, path: str) -> str:
        """``path`` (``/recordings/7.wav``) under the API's base."""
        return f"{self.url.rstrip('/')}{path}"


@dataclass(frozen=True, slots=True)
class Actor:
    organization_id: int          # the organization the request acts on (a sub-organization when asked)
    key_organization_id: int      # the organization that owns the credential
    key_id: int | None
    scopes: ScopeSet
    key_lineage_id: int | None = None  # the key's rotation chain (a successor shares its predecessor's)
    key_expires_at: datetime | None = None  # when the acting key stops working (None: never, or no key)
    key_in_grace: bool = False  # the acting key was rotated and works only until its grace period ends

    @classmethod
    def system(cls, organization_id: int) -> Actor:
        return cls(organization_id, organization_id, None, ScopeSet.of(["*"]))

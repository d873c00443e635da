"""What a unit of work acts in: who is acting (the organization a request works in and the key that made it),
where clients reach the API, and what caused the work (the triggers' loop-guard depth)."""

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


class CauseContext:
    """What caused the work of one unit of work (one per request, job or pass, provided with its unit of work):
    ``depth`` is how many trigger actions led to it (``DomainEvent.depth``), 0 when nothing did.

    The unit of work records every event at least this deep; the triggers' loop guard reads that depth. A trigger's
    action sets it (``run.depth + 1``) before it acts. Work started now that records events later (a call placed,
    an SMS sent, a campaign contact added) stores it (``cause_depth``), and the use case that carries that work on
    in a unit of its own (advancing the call, settling the contact) sets it back from there."""

    __slots__ = ("depth",)

    def __init__(self) -> None:
        self.depth = 0

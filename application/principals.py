"""Principals: who a request is, as its authenticator established it.

Each authenticator (API key, dashboard session, widget token, public) yields a ``Principal``. Use cases
never see a principal: they see the ``Actor`` it acts as (``Principal.acting_in``), which names the
organization a request works in, the credential's own organization and the scopes it holds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from application.context import Actor
from domain.api_keys import ApiKey
from domain.identity import persisted
from domain.organizations import Organization
from domain.roles import Role, scopes_of
from domain.scopes import ScopeSet
from domain.widget import WidgetGrant, replay_scope


class AuthenticationFailed(Exception):
    """A credential that does not identify a usable principal (401)."""

    code = "INVALID_API_KEY"


class PrincipalKind(enum.StrEnum):
    API_KEY = "api_key"
    SESSION = "session"   # a dashboard user signed in
    WIDGET = "widget"     # a widget token issued for one campaign
    PUBLIC = "public"     # no credential: who the caller is does not matter to the route


SESSION_REPLAY_SCOPE = 0
"""The idempotency scope of a dashboard session's requests (no key: never a key's lineage, a positive id)."""


@dataclass(frozen=True, slots=True)
class Principal:
    kind: PrincipalKind
    organization: Organization | None = None
    scopes: ScopeSet = field(default_factory=lambda: ScopeSet.of([]))
    key: ApiKey | None = None                  # API_KEY: the key (its lineage shares rate limits and replays)
    user_id: int | None = None                 # SESSION: the signed-in user
    widget: WidgetGrant | None = None          # WIDGET: what the token grants (its campaign, origins, jti)

    def __post_init__(self) -> None:
        if self.authenticated and self.organization is None:
            raise ValueError(f"a {self.kind} principal belongs to an organization")

    @classmethod
    def public(cls) -> Principal:
        return cls(PrincipalKind.PUBLIC)

    @classmethod
    def api_key(cls, key: ApiKey, organization: Organization) -> Principal:
        return cls(PrincipalKind.API_KEY, organization, ScopeSet.of(key.scopes), key=key)

    @classmethod
    def widget_token(cls, grant: WidgetGrant, organization: Organization) -> Principal:
        """A widget token's principal: no scopes (the token opens the widget routes only, for its campaign)."""
        return cls(PrincipalKind.WIDGET, organization, widget=grant)

    @classmethod
    def session(cls, user_id: int, organization: Organization, role: Role) -> Principal:
        """A dashboard user signed in, in the user's organization, with the scopes of its role
        (``domain/roles.py``): the scope check every route and page declares enforces the role."""
        return cls(PrincipalKind.SESSION, organization, scopes_of(role), user_id=user_id)

    @property
    def authenticated(self) -> bool:
        return self.kind is not PrincipalKind.PUBLIC

    @property
    def rate_bucket(self) -> str:
        """The rate-limit counters it spends: a rotated key shares its predecessor's."""
        if self.key is not None:
            return f"key:{self.key.lineage_id or self.key.id}"
        if self.user_id is not None:
            return f"user:{self.user_id}"
        if self.widget is not None:
            return f"widget:{self.widget.token_id}"  # each token its own budget, never its minting key's
        return f"{self.kind}:{self.organization.id if self.organization else 0}"

    @property
    def replay_scope(self) -> int:
        """The idempotency scope of its requests (the ``lineage_id`` of its idempotency records): a key's lineage
        (a rotated key replays its predecessor's), a widget token's own (``domain.widget.replay_scope``, negative),
        and ``SESSION_REPLAY_SCOPE`` for a dashboard session, which has no key."""
        if self.widget is not None:
            return replay_scope(self.widget.token_id)
        if self.key is not None:
            return persisted(self.key.lineage)
        return SESSION_REPLAY_SCOPE

    def acting_in(self, organization: Organization) -> Actor:
        """The actor use cases see, working in ``organization`` (its own, or a sub-organization)."""
        if self.organization is None:
            raise ValueError("a public principal acts in no organization")
        key_id = self.key.id if self.key is not None else None
        lineage = self.key.lineage if self.key is not None else None
        key = self.key
        return Actor(persisted(organization.id), persisted(self.organization.id), key_id, self.scopes, lineage,
                     key.expires_at if key is not None else None,
                     key is not None and key.rotated_to_id is not None)

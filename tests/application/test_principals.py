"""A principal becomes the actor use cases see: its organization, its scopes and its key's lineage."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from application.principals import SESSION_REPLAY_SCOPE, Principal, PrincipalKind
from domain.api_keys import ApiKey
from domain.organizations import Organization
from domain.roles import Role
from domain.scopes import ScopeSet
from domain.widget import WidgetGrant, replay_scope

NOW = datetime(2026, 3, 9, tzinfo=UTC)


def _org(org_id: int, org_type: str = "partner") -> Organization:
    return Organization(org_id, f"org {org_id}", "enterprise", org_type, None, NOW, NOW)


def _key(key_id: int, lineage_id: int | None) -> ApiKey:
    return ApiKey(id=key_id, organization_id=1, name="k", prefix="parley_sk_", last_four="abcd", key_hash="h",
                  scopes=("agents:read",), status="active", created_at=NOW, expires_at=None, last_used_at=None,
                  lineage_id=lineage_id)


def test_an_api_key_principal_acts_as_its_key_in_the_acting_organization() -> None:
    principal = Principal.api_key(_key(7, 3), _org(1))
    assert principal.kind is PrincipalKind.API_KEY and principal.authenticated
    assert principal.rate_bucket == "key:3"  # a rotated key shares its predecessor's counters
    actor = principal.acting_in(_org(2, "standard"))
    assert (actor.organization_id, actor.key_organization_id, actor.key_id, actor.key_lineage_id) == (2, 1, 7, 3)
    assert actor.scopes == ScopeSet.of(["agents:read"])


def test_a_public_principal_is_no_actor() -> None:
    principal = Principal.public()
    assert not principal.authenticated
    with pytest.raises(ValueError):
        principal.acting_in(_org(1))


def test_an_authenticated_principal_belongs_to_an_organization() -> None:
    with pytest.raises(ValueError, match="belongs to an organization"):
        Principal(PrincipalKind.SESSION, user_id=4)


def test_each_principal_replays_in_its_own_idempotency_scope() -> None:
    assert Principal.api_key(_key(7, 3), _org(1)).replay_scope == 3  # a rotated key: its predecessor's records
    assert Principal.api_key(_key(7, None), _org(1)).replay_scope == 7
    grant = WidgetGrant("jti-1", 1, 5, ("https://a.example",), NOW, 7, 1)
    assert Principal.widget_token(grant, _org(1)).replay_scope == replay_scope("jti-1") < 0  # never a key's
    assert Principal.session(4, _org(1), Role.OWNER).replay_scope == SESSION_REPLAY_SCOPE

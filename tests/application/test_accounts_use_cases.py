"""Organizations, sub-organizations, API keys and authentication as use cases: plans and types,
tenancy between partners and children, the scope ceiling on key management, rotation with a grace
period, and the credential checks of authentication."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.accounts import (
    Authenticate,
    AuthenticateCommand,
    AuthenticationFailed,
    CreateOrganization,
    CreateOrganizationCommand,
    CreateSubOrganization,
    CreateSubOrganizationCommand,
    CreateUser,
    CreateUserCommand,
    DeleteSubOrganization,
    DeleteSubOrganizationCommand,
    GetApiKey,
    GetApiKeyCommand,
    GetSubOrganization,
    GetSubOrganizationCommand,
    IssueApiKey,
    IssueApiKeyCommand,
    ListApiKeys,
    ListApiKeysCommand,
    ListSubOrganizations,
    ListSubOrganizationsCommand,
    ResolveActingOrganization,
    ResolveActingOrganizationCommand,
    RevokeApiKey,
    RevokeApiKeyCommand,
    RotateApiKey,
    RotateApiKeyCommand,
    UpdateSubOrganization,
    UpdateSubOrganizationCommand,
)
from application.context import Actor
from application.ports.platform import PageRequest
from domain import api_keys as keyfmt
from domain.errors import Conflict, InsufficientScope, NotFound, PlanRequired, SubOrgForbidden, ValidationFailed
from domain.scopes import ScopeSet
from tests.application.conftest import App

PAGE = PageRequest(limit=50, offset=0)


def acting(org_id: int, *scopes: str, key_id: int | None = None) -> Actor:
    return Actor(org_id, org_id, key_id, ScopeSet.of(list(scopes or ("*",))))


async def issue(app: App, org_id: int, *scopes: str, granted_by: tuple[str, ...] | None = None,
                expires_in: timedelta | None = None):  # type: ignore[no-untyped-def]
    expires = app.clock.now() + expires_in if expires_in else None
    ceiling = ScopeSet.of(list(granted_by)) if granted_by is not None else None
    return await app.run(IssueApiKey, IssueApiKeyCommand(org_id, "key", scopes, expires, ceiling))


# --- organizations ----------------------------------------------------------------------------------


async def test_create_organization_validates_plan_type_name_and_parent(app: App) -> None:
    for command, field in [
        (CreateOrganizationCommand("Acme", plan="platinum"), "plan"),
        (CreateOrganizationCommand("Acme", org_type="reseller"), "org_type"),
        (CreateOrganizationCommand("   "), "name"),
    ]:
        with pytest.raises(ValidationFailed) as invalid:
            await app.run(CreateOrganization, command)
        assert field in str(invalid.value.details), command
    with pytest.raises(NotFound):
        await app.run(CreateOrganization, CreateOrganizationCommand("Child", parent_id=9999))
    standard = await app.organization(org_type="standard")
    with pytest.raises(ValidationFailed):  # only a partner may have children
        await app.run(CreateOrganization, CreateOrganizationCommand("Child", parent_id=standard))

    org = await app.run(CreateOrganization, CreateOrganizationCommand("  Acme  ", "business"))
    assert (org.name, org.plan, org.org_type, org.created_at) == ("Acme", "business", "standard", app.clock.now())


async def test_a_child_plan_never_exceeds_its_partner(app: App) -> None:
    partner = await app.organization(plan="business", org_type="partner")
    with pytest.raises(PlanRequired):
        await app.run(CreateOrganization, CreateOrganizationCommand("Child", "enterprise", parent_id=partner))
    with pytest.raises(PlanRequired):
        await app.run(CreateSubOrganization, CreateSubOrganizationCommand(acting(partner), "Child", "enterprise"))
    child = await app.run(CreateSubOrganization, CreateSubOrganizationCommand(acting(partner), " Child ", None))
    assert (child.name, child.plan, child.parent_id) == ("Child", "business", partner)  # the partner's plan
    with pytest.raises(PlanRequired):
        await app.run(UpdateSubOrganization,
                      UpdateSubOrganizationCommand(acting(partner), child.id, {"plan": "enterprise"}))


async def test_only_partners_manage_sub_organizations_and_only_their_own(app: App) -> None:
    standard = await app.organization(org_type="standard")
    with pytest.raises(SubOrgForbidden):
        await app.run(CreateSubOrganization, CreateSubOrganizationCommand(acting(standard), "Child", None))
    with pytest.raises(SubOrgForbidden):
        await app.run(ListSubOrganizations, ListSubOrganizationsCommand(acting(standard), PAGE))

    partner = await app.organization(org_type="partner")
    other = await app.organization(org_type="partner")
    mine = await app.run(CreateSubOrganization, CreateSubOrganizationCommand(acting(partner), "Mine", None))
    theirs = await app.run(CreateSubOrganization, CreateSubOrganizationCommand(acting(other), "Theirs", None))
    listed = await app.run(ListSubOrganizations, ListSubOrganizationsCommand(acting(partner), PAGE))
    assert [o.id for o in listed.items] == [mine.id]
    for case, command in [(GetSubOrganization, GetSubOrganizationCommand(acting(partner), theirs.id or 0)),
                          (UpdateSubOrganization, UpdateSubOrganizationCommand(acting(partner), theirs.id or 0,
                                                                               {"name": "x"})),
                          (DeleteSubOrganization, DeleteSubOrganizationCommand(acting(partner), theirs.id or 0))]:
        with pytest.raises(NotFound):
            await app.run(case, command)
    assert (await app.run(GetSubOrganization, GetSubOrganizationCommand(acting(partner), mine.id))).name == "Mine"


async def test_updating_a_child_touches_updated_at_only_when_something_changed(app: App) -> None:
    partner = await app.organization(org_type="partner")
    child = await app.run(CreateSubOrganization, CreateSubOrganizationCommand(acting(partner), "Child", None))
    app.clock.advance(minutes=5)
    same = await app.run(UpdateSubOrganization,
                         UpdateSubOrganizationCommand(acting(partner), child.id, {"name": " Child "}))
    assert same.updated_at == child.updated_at
    renamed = await app.run(UpdateSubOrganization,
                            UpdateSubOrganizationCommand(acting(partner), child.id, {"name": "Renamed"}))
    assert (renamed.name, renamed.updated_at) == ("Renamed", app.clock.now())


async def test_deleting_a_child_revokes_its_keys_and_hides_it(app: App) -> None:
    partner = await app.organization(org_type="partner")
    child = await app.run(CreateSubOrganization, CreateSubOrganizationCommand(acting(partner), "Child", None))
    issued = await issue(app, child.id or 0, "*")
    assert (await app.run(Authenticate, AuthenticateCommand(issued.secret))).organization.id == child.id
    await app.run(DeleteSubOrganization, DeleteSubOrganizationCommand(acting(partner), child.id))
    with pytest.raises(AuthenticationFailed):
        await app.run(Authenticate, AuthenticateCommand(issued.secret))
    with pytest.raises(NotFound):
        await app.run(GetSubOrganization, GetSubOrganizationCommand(acting(partner), child.id))
    assert (await app.run(ListSubOrganizations, ListSubOrganizationsCommand(acting(partner), PAGE))).items == []


async def test_acting_for_a_sub_organization_needs_a_partner_and_its_own_child(app: App) -> None:
    partner_id = await app.organization(org_type="partner")
    child = await app.run(CreateSubOrganization, CreateSubOrganizationCommand(acting(partner_id), "Child", None))
    stranger = await app.organization(org_type="partner")
    standard_id = await app.organization()
    partner_key, standard_key = await issue(app, partner_id, "*"), await issue(app, standard_id, "*")
    partner = (await app.run(Authenticate, AuthenticateCommand(partner_key.secret))).organization
    standard = (await app.run(Authenticate, AuthenticateCommand(standard_key.secret))).organization

    resolved = await app.run(ResolveActingOrganization, ResolveActingOrganizationCommand(partner, child.id))
    assert resolved.id == child.id
    with pytest.raises(SubOrgForbidden):
        await app.run(ResolveActingOrganization, ResolveActingOrganizationCommand(standard, child.id))
    with pytest.raises((NotFound, SubOrgForbidden)):
        await app.run(ResolveActingOrganization, ResolveActingOrganizationCommand(partner, stranger))


# --- API keys -----------------------------------------------------------------------------------------


async def test_issue_validates_scopes_expiry_and_organization(app: App) -> None:
    org = await app.organization()
    with pytest.raises(ValidationFailed):
        await issue(app, org)  # no scope
    with pytest.raises(ValidationFailed):
        await issue(app, org, "agents:fly")
    with pytest.raises(ValidationFailed):
        await issue(app, org, "*", expires_in=-timedelta(seconds=1))
    with pytest.raises(NotFound):
        await issue(app, 9999, "*")
    issued = await issue(app, org, "agents:read", expires_in=timedelta(days=1))
    assert issued.record.scopes == ("agents:read",)
    assert issued.secret.endswith(issued.record.last_four) and issued.record.key_hash != issued.secret


async def test_a_key_cannot_grant_scopes_it_does_not_hold_and_needs_enterprise(app: App) -> None:
    org = await app.organization(plan="enterprise")
    with pytest.raises(ValidationFailed):
        await issue(app, org, "agents:write", granted_by=("agents:read",))
    narrow = await issue(app, org, "agents:read", granted_by=("agents:read", "calls:read"))
    assert narrow.record.scopes == ("agents:read",)

    business = await app.organization(plan="business")
    with pytest.raises(PlanRequired):  # key management through the API is an enterprise feature
        await issue(app, business, "agents:read", granted_by=("*",))
    assert (await issue(app, business, "agents:read")).record.scopes == ("agents:read",)  # the operator may


async def test_authenticate_refuses_malformed_unknown_revoked_and_expired_keys(app: App) -> None:
    org = await app.organization()
    with pytest.raises(AuthenticationFailed, match="malformed"):
        await app.run(Authenticate, AuthenticateCommand("not-a-key"))
    good = await issue(app, org, "*", expires_in=timedelta(hours=1))
    forged = keyfmt.compose("A" * keyfmt.SECRET_LENGTH)  # well formed, never issued
    with pytest.raises(AuthenticationFailed, match="not valid"):
        await app.run(Authenticate, AuthenticateCommand(forged))
    found = await app.run(Authenticate, AuthenticateCommand(good.secret))
    assert (found.key.id, found.organization.id) == (good.record.id, org)

    app.clock.advance(hours=1)
    with pytest.raises(AuthenticationFailed, match="revoked or expired"):
        await app.run(Authenticate, AuthenticateCommand(good.secret))

    other = await issue(app, org, "*")
    await _revoke(app, acting(org), other.record.id)
    with pytest.raises(AuthenticationFailed, match="revoked or expired"):
        await app.run(Authenticate, AuthenticateCommand(other.secret))


async def _revoke(app: App, actor: Actor, key_id: int | None) -> None:
    await app.run(RevokeApiKey, RevokeApiKeyCommand(actor, key_id or 0))


async def test_key_management_is_scoped_to_the_organization(app: App) -> None:
    mine, theirs = await app.organization(), await app.organization()
    own = await issue(app, mine, "*")
    foreign = await issue(app, theirs, "*")
    listed = await app.run(ListApiKeys, ListApiKeysCommand(acting(mine), PAGE))
    assert [k.id for k in listed.items] == [own.record.id]
    with pytest.raises(NotFound):
        await app.run(GetApiKey, GetApiKeyCommand(acting(mine), foreign.record.id))
    with pytest.raises(NotFound):
        await _revoke(app, acting(mine), foreign.record.id)
    with pytest.raises(NotFound):
        await app.run(RotateApiKey, RotateApiKeyCommand(acting(mine), foreign.record.id, None))
    assert (await app.run(Authenticate, AuthenticateCommand(foreign.secret))).key.status == "active"


async def test_a_narrow_key_cannot_revoke_or_rotate_a_broader_one(app: App) -> None:
    org = await app.organization()
    broad = await issue(app, org, "*")
    narrow = acting(org, "api_keys:write", "agents:read")
    with pytest.raises(InsufficientScope):
        await _revoke(app, narrow, broad.record.id)
    with pytest.raises(InsufficientScope):
        await app.run(RotateApiKey, RotateApiKeyCommand(narrow, broad.record.id, None))
    assert (await app.run(Authenticate, AuthenticateCommand(broad.secret))).key.status == "active"

    same = await issue(app, org, "agents:read")
    await _revoke(app, narrow, same.record.id)  # a key holding no more than the caller's scopes
    await _revoke(app, narrow, same.record.id)  # revoking twice is harmless
    assert (await app.run(GetApiKey, GetApiKeyCommand(acting(org), same.record.id))).status == "revoked"


async def test_rotation_keeps_scopes_and_lineage_and_the_old_key_works_for_the_grace_period(app: App) -> None:
    org = await app.organization()
    old = await issue(app, org, "agents:read", "calls:schedule")
    rotation = await app.run(RotateApiKey, RotateApiKeyCommand(acting(org), old.record.id, 2))
    new = rotation.issued
    assert new.record.scopes == old.record.scopes and new.secret != old.secret
    assert new.record.lineage_id == old.record.id
    assert rotation.previous_key_expires_at == app.clock.now() + timedelta(hours=2)
    assert (await app.run(Authenticate, AuthenticateCommand(old.secret))).key.rotated_to_id == new.record.id

    with pytest.raises(Conflict) as again:  # rotate the successor instead
        await app.run(RotateApiKey, RotateApiKeyCommand(acting(org), old.record.id, 2))
    assert again.value.details == {"rotated_to_id": new.record.id}
    with pytest.raises(ValidationFailed):  # a grace period of 1 to 168 hours
        await app.run(RotateApiKey, RotateApiKeyCommand(acting(org), new.record.id, 0))
    second = await app.run(RotateApiKey, RotateApiKeyCommand(acting(org), new.record.id, 1))
    assert second.issued.record.lineage_id == old.record.id  # one lineage through every rotation

    app.clock.advance(hours=2)
    with pytest.raises(AuthenticationFailed):
        await app.run(Authenticate, AuthenticateCommand(old.secret))
    found = await app.run(Authenticate, AuthenticateCommand(second.issued.secret))
    assert found.key.id == second.issued.record.id


async def test_rotation_never_extends_an_expiry_and_refuses_dead_keys_and_lower_plans(app: App) -> None:
    org = await app.organization()
    soon = await issue(app, org, "*", expires_in=timedelta(minutes=30))
    rotation = await app.run(RotateApiKey, RotateApiKeyCommand(acting(org), soon.record.id, 24))
    assert rotation.previous_key_expires_at == soon.record.expires_at
    assert rotation.issued.record.expires_at == soon.record.expires_at

    revoked = await issue(app, org, "*")
    await _revoke(app, acting(org), revoked.record.id)
    with pytest.raises(Conflict):
        await app.run(RotateApiKey, RotateApiKeyCommand(acting(org), revoked.record.id, None))

    starter = await app.organization(plan="starter")
    key = await issue(app, starter, "*")
    with pytest.raises(PlanRequired):
        await app.run(RotateApiKey, RotateApiKeyCommand(acting(starter), key.record.id, None))


# --- dashboard users ------------------------------------------------------------------------------------


async def test_users_have_unique_case_insensitive_emails_and_real_passwords(app: App) -> None:
    org = await app.organization()
    with pytest.raises(ValidationFailed):
        await app.run(CreateUser, CreateUserCommand(org, "not-an-email", "long enough"))
    with pytest.raises(ValidationFailed):
        await app.run(CreateUser, CreateUserCommand(org, "a@example.com", "short"))
    with pytest.raises(NotFound):
        await app.run(CreateUser, CreateUserCommand(9999, "a@example.com", "long enough"))
    assert await app.run(CreateUser, CreateUserCommand(org, "Ann@Example.com", "long enough")) > 0
    with pytest.raises(Conflict):
        await app.run(CreateUser, CreateUserCommand(org, "ann@example.COM", "another password"))

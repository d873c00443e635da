"""Organizations, API keys, dashboard users and authentication."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from application.context import Actor
from application.ports.accounts import ApiKeyRepository, OrganizationRepository, UserRepository
from application.ports.billing import BillingRepository
from application.ports.passwords import PasswordHasher
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Page, PageRequest, Random
from application.principals import AuthenticationFailed, Principal
from domain import api_keys as keyfmt
from domain import rfc3339
from domain.api_keys import ApiKey, KeyStatus
from domain.billing import PlanChange
from domain.destinations import DialingPolicy, parse_countries
from domain.errors import (
    Conflict,
    DomainError,
    InsufficientScope,
    KeyInGracePeriod,
    NotFound,
    SubOrgForbidden,
    ValidationFailed,
)
from domain.identity import persisted
from domain.organizations import (
    ORG_TYPES,
    PLANS,
    Organization,
    check_sub_org_access,
    require_plan_within_parent,
)
from domain.patching import MergePatch, apply_patch
from domain.roles import parse_role
from domain.scopes import ScopeSet, normalise


@dataclass(frozen=True, slots=True)
class AuthenticateCommand:
    token: str = field(repr=False)  # the Bearer secret as sent


class Authenticate:
    """The API-key authenticator: a Bearer secret -> the key's principal."""

    def __init__(self, keys: ApiKeyRepository, clock: Clock) -> None:
        self.keys, self.clock = keys, clock

    async def execute(self, command: AuthenticateCommand) -> Principal:
        token = command.token
        if not keyfmt.is_well_formed(token):
            raise AuthenticationFailed("API key is malformed")
        found = await self.keys.find_credential(keyfmt.digest(token))
        if found is None:
            raise AuthenticationFailed("API key is not valid")
        key, org = found
        if not key.is_usable(self.clock.now()):
            raise AuthenticationFailed("API key is revoked or expired")
        return Principal.api_key(key, org)


@dataclass(frozen=True, slots=True)
class ResolveActingOrganizationCommand:
    own: Organization  # the credential's organization
    sub_org_id: int    # X-Sub-Org-Id


class ResolveActingOrganization:
    """Applies X-Sub-Org-Id: a partner acts on one of its children."""

    def __init__(self, orgs: OrganizationRepository) -> None:
        self.orgs = orgs

    async def execute(self, command: ResolveActingOrganizationCommand) -> Organization:
        own, sub_org_id = command.own, command.sub_org_id
        if not own.is_partner:
            raise SubOrgForbidden("X-Sub-Org-Id needs a key of a partner organization")
        return check_sub_org_access(own, await self.orgs.get(sub_org_id), sub_org_id)


# --- organizations -----------------------------------------------------------------------


def _check_org_fields(plan: str | None, org_type: str | None) -> None:
    if plan is not None and plan not in PLANS:
        raise ValidationFailed.field("plan", f"must be one of {', '.join(PLANS)}")
    if org_type is not None and org_type not in ORG_TYPES:
        raise ValidationFailed.field("org_type", f"must be one of {', '.join(ORG_TYPES)}")


@dataclass(frozen=True, slots=True)
class CreateOrganizationCommand:
    name: str
    plan: str = "business"
    org_type: str = "standard"
    parent_id: int | None = None


class CreateOrganization:
    """Operator path (CLI): any plan and type; a child's plan still cannot exceed its parent's."""

    def __init__(self, orgs: OrganizationRepository, clock: Clock) -> None:
        self.orgs, self.clock = orgs, clock

    async def execute(self, command: CreateOrganizationCommand) -> Organization:
        _check_org_fields(command.plan, command.org_type)
        if not command.name.strip():
            raise ValidationFailed.field("name", "must not be empty")
        if command.parent_id is not None:
            parent = await self.orgs.get(command.parent_id)
            if parent is None:
                raise NotFound("organization", command.parent_id)
            if not parent.is_partner:
                raise ValidationFailed.field("parent", "the parent must be a partner organization")
            require_plan_within_parent(command.plan, parent)
        now = self.clock.now()
        org = Organization(None, command.name.strip(), command.plan, command.org_type, command.parent_id, now, now)
        return await self.orgs.add(org)


async def _own_partner(orgs: OrganizationRepository, actor: Actor) -> Organization:
    org = await orgs.get(actor.organization_id)
    if org is None or not org.is_partner:
        raise SubOrgForbidden("only partner organizations manage sub-organizations")
    return org


async def _child(orgs: OrganizationRepository, actor: Actor, org_id: int) -> Organization:
    partner = await _own_partner(orgs, actor)
    return await _child_of(orgs, partner, org_id)


async def _child_of(orgs: OrganizationRepository, partner: Organization, org_id: int) -> Organization:
    child = await orgs.get(org_id)
    if child is None or child.parent_id != partner.id:
        raise NotFound("organization", org_id)
    return child


@dataclass(frozen=True, slots=True)
class CreateSubOrganizationCommand:
    actor: Actor
    name: str
    plan: str | None = None  # None: the partner's plan


class CreateSubOrganization:
    def __init__(self, orgs: OrganizationRepository, clock: Clock) -> None:
        self.orgs, self.clock = orgs, clock

    async def execute(self, command: CreateSubOrganizationCommand) -> Organization:
        partner = await _own_partner(self.orgs, command.actor)
        plan = command.plan
        _check_org_fields(plan, None)
        if plan is not None:
            require_plan_within_parent(plan, partner)
        now = self.clock.now()
        org = Organization(None, command.name.strip(), plan or partner.plan, "standard", partner.id, now, now)
        return await self.orgs.add(org)


@dataclass(frozen=True, slots=True)
class ListSubOrganizationsCommand:
    actor: Actor
    page: PageRequest


class ListSubOrganizations:
    def __init__(self, orgs: OrganizationRepository) -> None:
        self.orgs = orgs

    async def execute(self, command: ListSubOrganizationsCommand) -> Page[Organization]:
        partner = await _own_partner(self.orgs, command.actor)
        return await self.orgs.list_children(persisted(partner.id), command.page)


@dataclass(frozen=True, slots=True)
class GetSubOrganizationCommand:
    actor: Actor
    org_id: int


class GetSubOrganization:
    def __init__(self, orgs: OrganizationRepository) -> None:
        self.orgs = orgs

    async def execute(self, command: GetSubOrganizationCommand) -> Organization:
        return await _own_or_child(self.orgs, command.actor, command.org_id)


async def _own_or_child(orgs: OrganizationRepository, actor: Actor, org_id: int) -> Organization:
    """The acting organization itself (any organization reads and sets its own dialing policy), or a child of a
    partner (404 for any other)."""
    if org_id == actor.organization_id:
        own = await orgs.get(org_id)
        if own is None:
            raise NotFound("organization", org_id)
        return own
    return await _child(orgs, actor, org_id)


def _dialing_policy(current: DialingPolicy, patch: MergePatch, phones: PhoneNormalizer) -> DialingPolicy:
    """``dialing_policy`` merged into the current one: countries as ISO 3166 alpha-2 codes (400 naming them)."""
    countries = current.allowed_countries
    if "allowed_countries" in patch:
        countries = parse_countries(patch["allowed_countries"], "dialing_policy.allowed_countries",
                                    phones.countries())
    return DialingPolicy(countries, bool(patch.get("block_premium", current.block_premium)))


@dataclass(frozen=True, slots=True)
class UpdateSubOrganizationCommand:
    actor: Actor
    org_id: int
    patch: MergePatch  # name, plan


class UpdateSubOrganization:
    """PATCH a child's name, plan and dialing policy, or the acting organization's own name and dialing policy
    (its own plan changes through billing). A child's plan change is kept in the billing plan history, so the
    child's period is billed by the plans it held when (an upgrade's price difference for the days left and usage
    at the rate of the plan in force), never by the plan it holds when the period closes."""

    def __init__(self, orgs: OrganizationRepository, billing: BillingRepository, phones: PhoneNormalizer,
                 clock: Clock) -> None:
        self.orgs, self.billing, self.phones, self.clock = orgs, billing, phones, clock

    async def execute(self, command: UpdateSubOrganizationCommand) -> Organization:
        actor = command.actor
        child = await _own_or_child(self.orgs, actor, command.org_id)
        changes = dict(command.patch)
        _check_org_fields(changes.get("plan"), None)
        if "dialing_policy" in changes:
            changes["dialing_policy"] = _dialing_policy(child.dialing_policy, changes["dialing_policy"], self.phones)
        if child.id == actor.organization_id and "plan" in changes:
            if changes["plan"] != child.plan:
                raise ValidationFailed.field("plan", "an organization's own plan changes through "
                                                     "PATCH /billing/subscription")
            del changes["plan"]
        if changes.get("plan") is not None:
            partner = await _own_partner(self.orgs, actor)
            require_plan_within_parent(changes["plan"], partner)
        if "name" in changes:
            changes["name"] = changes["name"].strip()
        updated = apply_patch(child, changes)
        if updated == child:  # a PATCH that changes nothing leaves updated_at alone
            return child
        now = self.clock.now()
        if updated.plan != child.plan:
            child_id = child.id or command.org_id
            await self.billing.add_plan_change(PlanChange(child_id, child.plan, updated.plan, now, charged=False))
            # the partner's change is the latest word: a downgrade the child had waiting for the period's end would
            # otherwise undo it when the period closes
            account = await self.billing.account(child_id, for_update=True)
            if account.pending_plan is not None:
                await self.billing.save_account(replace(account, pending_plan=None))
        return await self.orgs.update(replace(updated, updated_at=now))


@dataclass(frozen=True, slots=True)
class DeleteSubOrganizationCommand:
    actor: Actor
    org_id: int


class DeleteSubOrganization:
    def __init__(self, orgs: OrganizationRepository, keys: ApiKeyRepository, clock: Clock) -> None:
        self.orgs, self.keys, self.clock = orgs, keys, clock

    async def execute(self, command: DeleteSubOrganizationCommand) -> None:
        partner = await _own_partner(self.orgs, command.actor)
        if command.org_id == partner.id:  # readable and changeable here, as every organization's own, not deleted
            raise Conflict("an organization cannot delete itself: a partner deletes its sub-organizations")
        child = await _child_of(self.orgs, partner, command.org_id)
        await self.keys.revoke_all(child.id or command.org_id)
        await self.orgs.delete(child.id or command.org_id, self.clock.now())


# --- API keys ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IssuedKey:
    record: ApiKey
    secret: str  # the whole key, shown once


@dataclass(frozen=True, slots=True)
class IssueApiKeyCommand:
    organization_id: int
    name: str
    scopes: tuple[str, ...]
    expires_at: datetime | None = None
    granted_by: ScopeSet | None = None  # None: operator (CLI), no ceiling
    issuer: Actor | None = None  # who asks (a key's expiry caps the new key's); None: the operator or a session


class IssueApiKey:
    def __init__(self, keys: ApiKeyRepository, orgs: OrganizationRepository, clock: Clock, random: Random) -> None:
        self.keys, self.orgs, self.clock, self.random = keys, orgs, clock, random

    async def execute(self, command: IssueApiKeyCommand) -> IssuedKey:
        try:
            scopes = normalise(command.scopes)
        except ValueError as exc:
            raise ValidationFailed.field("scopes", str(exc)) from None
        if not scopes:
            raise ValidationFailed.field("scopes", "at least one scope is required")
        if command.granted_by is not None and not command.granted_by.covers(scopes):
            raise ValidationFailed.field("scopes", "cannot grant scopes the calling key does not hold")
        if command.issuer is not None:
            _require_settled_key(command.issuer)
        now = self.clock.now()
        if command.expires_at is not None and command.expires_at <= now:
            raise ValidationFailed.field("expires_at", "must be in the future")
        if command.issuer is not None:
            _require_no_later_than_issuer(command.issuer, command.expires_at)
        org = await self.orgs.get(command.organization_id)
        if org is None:
            raise NotFound("organization", command.organization_id)
        if command.granted_by is not None and not _partner_of(command.issuer, org):  # the API, not the CLI
            org.require_plan("enterprise", feature="API key management")
        return await _store_new_key(self.keys, self.random, command.organization_id, command.name, scopes,
                                    now, command.expires_at, lineage_id=None)


async def _store_new_key(keys: ApiKeyRepository, random: Random, organization_id: int, name: str,
                         scopes: tuple[str, ...], now: datetime, expires_at: datetime | None,
                         lineage_id: int | None) -> IssuedKey:
    secret = keyfmt.compose(random.base62(keyfmt.SECRET_LENGTH))
    record = ApiKey(
        id=None, organization_id=organization_id, name=name, prefix=keyfmt.display_prefix(secret),
        last_four=secret[-4:], key_hash=keyfmt.digest(secret), scopes=scopes, status="active",
        created_at=now, expires_at=expires_at, last_used_at=None, lineage_id=lineage_id,
    )
    stored = await keys.add(record)
    return IssuedKey(stored, secret)


def _require_settled_key(actor: Actor) -> None:
    """A key in its rotation grace period manages no key: a leaked key must not outlast its rotation by
    revoking its successor or minting a fresh one."""
    if actor.key_in_grace:
        raise KeyInGracePeriod


def _require_no_later_than_issuer(actor: Actor, expires_at: datetime | None) -> None:
    """A key never mints a key that outlives it."""
    ceiling = actor.key_expires_at
    if ceiling is None:
        return
    shown = rfc3339.format_utc(ceiling)
    if expires_at is None:
        raise ValidationFailed.field("expires_at", f"is required, at or before {shown}: the calling key expires "
                                                   "then and cannot create a key that never expires")
    if expires_at > ceiling:
        raise ValidationFailed.field("expires_at", f"must be at or before {shown}, when the calling key expires")


def _require_every_scope_of(actor: Actor, key: ApiKey) -> None:
    """Managing a key (rotate, revoke) needs every scope it holds, as issuing one does: a narrow key
    must not take over, or cut short, a broader one."""
    if not actor.scopes.covers(key.scopes):
        raise InsufficientScope("This key cannot manage a key holding scopes it does not hold")


def _partner_of(actor: Actor | None, org: Organization) -> bool:
    """The actor is a partner's key acting in one of its sub-organizations (``X-Sub-Org-Id``): a partner manages
    its clients' keys whatever their plans."""
    return actor is not None and org.parent_id is not None and actor.key_organization_id == org.parent_id


async def _enterprise(orgs: OrganizationRepository, actor: Actor, *plans: str) -> None:
    org = await orgs.get(actor.organization_id)
    if org is None:
        raise NotFound("organization", actor.organization_id)
    if not _partner_of(actor, org):
        org.require_plan(*plans, feature="API key management")


async def _key(keys: ApiKeyRepository, orgs: OrganizationRepository, actor: Actor, key_id: int) -> ApiKey:
    """A key of the acting organization (enterprise plan)."""
    await _enterprise(orgs, actor, "enterprise")
    key = await keys.get(actor.organization_id, key_id)
    if key is None:
        raise NotFound("api key", key_id)
    return key


@dataclass(frozen=True, slots=True)
class ListApiKeysCommand:
    actor: Actor
    page: PageRequest


class ListApiKeys:
    """The keys of the acting organization (enterprise plan)."""

    def __init__(self, keys: ApiKeyRepository, orgs: OrganizationRepository) -> None:
        self.keys, self.orgs = keys, orgs

    async def execute(self, command: ListApiKeysCommand) -> Page[ApiKey]:
        await _enterprise(self.orgs, command.actor, "enterprise")
        return await self.keys.list(command.actor.organization_id, command.page)


@dataclass(frozen=True, slots=True)
class GetApiKeyCommand:
    actor: Actor
    key_id: int


class GetApiKey:
    def __init__(self, keys: ApiKeyRepository, orgs: OrganizationRepository) -> None:
        self.keys, self.orgs = keys, orgs

    async def execute(self, command: GetApiKeyCommand) -> ApiKey:
        return await _key(self.keys, self.orgs, command.actor, command.key_id)


@dataclass(frozen=True, slots=True)
class RevokeApiKeyCommand:
    actor: Actor
    key_id: int


class RevokeApiKey:
    """Revoking needs every scope the key holds; revoking a revoked key is harmless."""

    def __init__(self, keys: ApiKeyRepository, orgs: OrganizationRepository) -> None:
        self.keys, self.orgs = keys, orgs

    async def execute(self, command: RevokeApiKeyCommand) -> None:
        _require_settled_key(command.actor)
        key = await _key(self.keys, self.orgs, command.actor, command.key_id)
        _require_every_scope_of(command.actor, key)
        if key.status != KeyStatus.REVOKED:
            await self.keys.update(key.revoked())


@dataclass(frozen=True, slots=True)
class Rotation:
    issued: IssuedKey
    previous_key_expires_at: datetime


@dataclass(frozen=True, slots=True)
class RotateApiKeyCommand:
    actor: Actor
    key_id: int
    grace_period_hours: int | None = None  # None: the default grace period


class RotateApiKey:
    """New secret, same scopes and lineage; the old key works until now + grace."""

    def __init__(self, keys: ApiKeyRepository, orgs: OrganizationRepository, clock: Clock, random: Random) -> None:
        self.keys, self.orgs, self.clock, self.random = keys, orgs, clock, random

    async def execute(self, command: RotateApiKeyCommand) -> Rotation:
        actor, key_id = command.actor, command.key_id
        grace = keyfmt.grace_period(command.grace_period_hours)
        _require_settled_key(actor)
        await _enterprise(self.orgs, actor, "business", "enterprise")
        key = await self.keys.get(actor.organization_id, key_id)
        if key is None:
            raise NotFound("api key", key_id)
        _require_every_scope_of(actor, key)
        now = self.clock.now()
        if not key.is_usable(now):
            raise Conflict("a revoked or expired key cannot be rotated")
        if key.rotated_to_id is not None:
            raise Conflict("this key was already rotated; rotate its successor instead",
                           details={"rotated_to_id": key.rotated_to_id})
        if actor.key_expires_at is not None and (key.expires_at is None or key.expires_at > actor.key_expires_at):
            # the successor keeps the key's expiry: it would outlive the calling key
            raise ValidationFailed.field("id", "names a key that expires after the calling key (its successor "
                                               "would outlive it); rotate it with a key that expires no sooner")
        issued = await _store_new_key(self.keys, self.random, key.organization_id, key.name, key.scopes,
                                      now, key.expires_at, lineage_id=key.lineage)
        old_expiry = now + grace
        if key.expires_at is not None and key.expires_at < old_expiry:
            old_expiry = key.expires_at
        await self.keys.update(replace(key, expires_at=old_expiry, rotated_to_id=issued.record.id))
        return Rotation(issued, old_expiry)


# --- dashboard users ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CreateUserCommand:
    organization_id: int
    email: str
    password: str = field(repr=False)
    role: str = "owner"


class CreateUser:
    """A dashboard user; the repository stores only what the ``PasswordHasher`` port made of the password."""

    def __init__(self, users: UserRepository, orgs: OrganizationRepository, passwords: PasswordHasher,
                 clock: Clock) -> None:
        self.users, self.orgs, self.passwords, self.clock = users, orgs, passwords, clock

    async def execute(self, command: CreateUserCommand) -> int:
        organization_id, email, password = command.organization_id, command.email, command.password
        if "@" not in email:
            raise ValidationFailed.field("email", "must be an email address")
        if len(password) < 8:
            raise ValidationFailed.field("password", "must be at least 8 characters")
        if await self.orgs.get(organization_id) is None:
            raise NotFound("organization", organization_id)
        if await self.users.find_by_email(email.lower()) is not None:
            raise Conflict("a user with this email exists")
        role = parse_role(command.role)
        return await self.users.add(organization_id, email.lower(), await self.passwords.hash(password),
                                    self.clock.now(), str(role))


__all__ = ["Authenticate", "AuthenticationFailed", "DomainError"]

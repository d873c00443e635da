"""The embeddable widget's use cases: minting a token (an API key's act), authenticating one, and what a token
may do — read its campaign's public face, and hand its campaign one contact, dialled at once when it can be.

A widget contact goes through the campaigns' one intake (``AddContact``) and the one dial-now path
(``DialContactNow``): DNC, calling hours, the concurrency cap, the agent and the quota apply exactly as for
``POST /campaigns/{id}/dial``. What differs is only the answer when the dial cannot happen now (the campaign is
not running, the hours are closed, the cap is reached, the agent is paused): the contact stays in the queue for
the dialer, and the visitor is told so instead of getting a 409.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from application.agents import as_published
from application.campaigns import AddContact, AddContactCommand
from application.context import Actor
from application.dialer import (
    CallingWindows,
    ConcurrencyLimit,
    DialContactNow,
    DialContactNowCommand,
    OutsideCallingHours,
)
from application.phones import e164
from application.ports.accounts import ApiKeyRepository, OrganizationRepository, RateLimiter
from application.ports.agents import AgentRepository
from application.ports.campaigns import CampaignRepository
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Random
from application.ports.usage import QuotaGate
from application.ports.widget import WidgetTokenInvalid, WidgetTokens
from application.principals import AuthenticationFailed, Principal
from domain import widget as rules
from domain.agents import unresolved_placeholders
from domain.calling_window import calling_window
from domain.calls import render_values
from domain.campaigns import Campaign, CampaignStatus, ContactDraft
from domain.errors import Forbidden, InvalidTransition, NotFound
from domain.identity import persisted
from domain.rate_limit import Window
from domain.widget import MissingPlaceholders, WidgetGrant, WidgetIntakeLimited


class WidgetAuthenticationFailed(AuthenticationFailed):
    code = "INVALID_WIDGET_TOKEN"


# ------------------------------------------------------------------------------------------------ minting


@dataclass(frozen=True, slots=True)
class MintWidgetTokenCommand:
    actor: Actor
    campaign_id: int
    allowed_origins: tuple[str, ...]
    ttl_seconds: int = rules.TTL_DEFAULT_SECONDS


@dataclass(frozen=True, slots=True)
class MintedWidgetToken:
    token: str = field(repr=False)
    grant: WidgetGrant


class MintWidgetToken:
    """A token for one campaign of the actor's organization (404 for any other), valid for ``ttl_seconds``
    from the Clock's now and only from the listed origins, while the minting key is usable. Nothing is stored: the
    token carries its grant, the minting key included."""

    def __init__(self, campaigns: CampaignRepository, tokens: WidgetTokens, clock: Clock, random: Random) -> None:
        self.campaigns, self.tokens, self.clock, self.random = campaigns, tokens, clock, random

    async def execute(self, command: MintWidgetTokenCommand) -> MintedWidgetToken:
        origins = rules.allowed_origins(command.allowed_origins)
        ttl = rules.ttl_seconds(command.ttl_seconds)
        actor = command.actor
        org = actor.organization_id
        if actor.key_id is None:
            raise Forbidden("Only an API key can mint widget tokens")
        campaign = await self.campaigns.get(org, command.campaign_id)
        if campaign is None:
            raise NotFound("campaign", command.campaign_id, field="campaign_id")
        # whole seconds: the token's ``exp`` is an integer, and the response says the same instant
        expires_at = (self.clock.now() + timedelta(seconds=ttl)).replace(microsecond=0)
        grant = WidgetGrant(self.random.hex(16), org, persisted(campaign.id), origins, expires_at, actor.key_id,
                            actor.key_organization_id)
        return MintedWidgetToken(self.tokens.issue(grant), grant)


# ------------------------------------------------------------------------------------------ authentication


@dataclass(frozen=True, slots=True)
class AuthenticateWidgetTokenCommand:
    token: str = field(repr=False)  # as sent after ``Authorization: Widget``


class AuthenticateWidgetToken:
    """The widget authenticator: a token -> the widget principal of its organization (401
    INVALID_WIDGET_TOKEN when the token does not verify at the Clock's now, its organization is gone, or the API
    key that minted it is revoked, expired or gone)."""

    def __init__(self, tokens: WidgetTokens, organizations: OrganizationRepository, keys: ApiKeyRepository,
                 clock: Clock) -> None:
        self.tokens, self.organizations, self.keys, self.clock = tokens, organizations, keys, clock

    async def execute(self, command: AuthenticateWidgetTokenCommand) -> Principal:
        now = self.clock.now()
        try:
            grant = self.tokens.verify(command.token, now)
        except WidgetTokenInvalid as exc:
            raise WidgetAuthenticationFailed(f"Widget token is not valid ({exc})") from None
        organization = await self.organizations.get(grant.organization_id)
        if organization is None:
            raise WidgetAuthenticationFailed("Widget token is not valid (its organization no longer exists)")
        key = await self.keys.get(grant.key_organization_id, grant.key_id)
        if key is None or not key.is_usable(now):
            raise WidgetAuthenticationFailed("Widget token is not valid (the API key that minted it was revoked)")
        return Principal.widget_token(grant, organization)


# --------------------------------------------------------------------------------------- the widget's routes


@dataclass(frozen=True, slots=True)
class GetWidgetCampaignCommand:
    actor: Actor
    campaign_id: int


@dataclass(frozen=True, slots=True)
class WidgetCampaign:
    name: str
    agent_name: str | None
    status: str
    open_now: bool
    next_open_at: datetime | None


class GetWidgetCampaign:
    """The campaign's public face. ``open_now`` / ``next_open_at``: its calling hours (and schedule) read in
    the campaign's own time zone; a visitor's call is then placed under the window of their number's zone. The two
    never disagree: ``next_open_at`` is null while calls go out now (and while the campaign is not running), else
    the first instant they will (after ``now``)."""

    def __init__(self, campaigns: CampaignRepository, agents: AgentRepository, windows: CallingWindows,
                 clock: Clock) -> None:
        self.campaigns, self.agents, self.windows, self.clock = campaigns, agents, windows, clock

    async def execute(self, command: GetWidgetCampaignCommand) -> WidgetCampaign:
        org = command.actor.organization_id
        campaign = await self.campaigns.get(org, command.campaign_id)
        if campaign is None:
            raise NotFound("campaign", command.campaign_id)
        agent = await self.agents.get(org, campaign.agent_id)
        now = self.clock.now()
        verdict = calling_window(now, await self.windows.rules(campaign), contact_zone=campaign.timezone)
        open_now = campaign.status == CampaignStatus.RUNNING and verdict.open
        next_open_at = verdict.next_open_at if campaign.status == CampaignStatus.RUNNING and not verdict.open else None
        return WidgetCampaign(campaign.name, agent.name if agent else None, campaign.status, open_now, next_open_at)


@dataclass(frozen=True, slots=True)
class SubmitWidgetContactCommand:
    actor: Actor
    campaign_id: int
    phone: str
    name: str | None = None
    custom_data: dict[str, Any] = field(default_factory=dict)
    client_address: str = ""
    """Where the request came from (the per-address cap); empty: no per-address cap."""


@dataclass(frozen=True, slots=True)
class WidgetContactSubmitted:
    contact_id: int
    status: str
    call_id: str | None


class SubmitWidgetContact:
    """Adds the visitor to the token's campaign (a number it has already gives back that contact) and dials it
    now through ``DialContactNow``; when that cannot happen now (campaign not running, hours closed, cap
    reached, agent paused, contact not pending) the contact waits for the dialer and ``call_id`` is None.

    Refused at once, with nothing kept: a contact the agent could never call, because its prompt needs values the
    visitor did not send (422 missing_placeholders); the intake caps, the campaign's ``widget_max_contacts_per_hour``
    and ``CONTACTS_PER_ADDRESS_PER_HOUR`` per client address (429 widget_intake_limited); and what refuses a dial
    (the destination policy, DNC: 422; the quota: 403); and, before anything else, a billing hold (402
    payment_required)."""

    def __init__(self, add_contact: AddContact, dial: DialContactNow, campaigns: CampaignRepository,
                 agents: AgentRepository, phones: PhoneNormalizer, limiter: RateLimiter, clock: Clock,
                 quota: QuotaGate) -> None:
        self.add_contact, self.dial, self.campaigns, self.agents = add_contact, dial, campaigns, agents
        self.phones, self.limiter, self.clock, self.quota = phones, limiter, clock, quota

    async def execute(self, command: SubmitWidgetContactCommand) -> WidgetContactSubmitted:
        org = command.actor.organization_id
        campaign = await self.campaigns.get(org, command.campaign_id)
        if campaign is None:
            raise NotFound("campaign", command.campaign_id)
        # the one gate's billing standing: 402 payment_required while billing holds new work (nothing is kept)
        await self.quota.ensure_standing(org, self.clock.now())
        phone = e164(self.phones, command.phone, "phone")
        live = await self.agents.get(org, campaign.agent_id)
        # the call would run the latest published version, so its placeholders are the ones that count
        agent = await as_published(self.agents, live, live.current_version) if live is not None else None
        if agent is not None:
            missing = unresolved_placeholders(agent, render_values(command.name, phone, dict(command.custom_data)))
            if missing:
                raise MissingPlaceholders(missing)
        await self._within_caps(campaign, command.client_address)
        draft = ContactDraft(0, command.phone, command.name, None, dict(command.custom_data))
        contact = (await self.add_contact.execute(AddContactCommand(command.actor, command.campaign_id,
                                                                    draft))).contact
        try:
            dialled = await self.dial.execute(DialContactNowCommand(command.actor, command.campaign_id,
                                                                    contact_id=contact.id))
        except (OutsideCallingHours, ConcurrencyLimit, InvalidTransition):
            return WidgetContactSubmitted(persisted(contact.id), contact.status, None)
        return WidgetContactSubmitted(dialled.contact_id, "dialing", dialled.call_id)

    async def _within_caps(self, campaign: Campaign, client_address: str) -> None:
        await within_widget_caps(self.limiter, self.clock.now(), campaign, client_address)


async def within_widget_caps(limiter: RateLimiter, now: datetime, campaign: Campaign, client_address: str) -> None:
    """Counts a visitor's request (a contact, a web call) against the widget's hourly caps, the campaign's
    ``widget_max_contacts_per_hour`` and ``CONTACTS_PER_ADDRESS_PER_HOUR`` per client address, or refuses it (429
    widget_intake_limited) without counting it anywhere."""
    caps = [("campaign", f"widget-campaign:{campaign.id}",
             (Window(rules.INTAKE_WINDOW_SECONDS, campaign.widget_max_contacts_per_hour),))]
    if client_address:
        caps.append(("address", f"widget-address:{campaign.organization_id}:{client_address}",
                     (Window(rules.INTAKE_WINDOW_SECONDS, rules.CONTACTS_PER_ADDRESS_PER_HOUR),)))
    for scope, bucket, windows in caps:
        before = await limiter.peek(bucket, windows, now)
        if not before.allowed:
            _refuse(scope, before.limit, before.retry_after)
    for scope, bucket, windows in caps:
        decision = await limiter.hit(bucket, windows, now)
        if not decision.allowed:  # another request took the last place meanwhile
            _refuse(scope, decision.limit, decision.retry_after)


def _refuse(scope: str, limit: int, retry_after: int | None) -> None:
    whom = "this campaign" if scope == "campaign" else "this address"
    raise WidgetIntakeLimited(f"The widget took {limit} contacts for {whom} this hour, its limit; try again "
                              "later", retry_after_seconds=retry_after or 1,
                              details={"limit": limit, "scope": scope})

"""Telephony resources: providers (credentials sealed at rest, never returned), phone numbers and stats."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TypeVar

from application.carriers import (
    CarrierAccounts,
    CarrierLinks,
    CarrierRefused,
    check_api_base_url,
    check_credentials,
    is_carrier,
)
from application.context import Actor
from application.phones import e164
from application.ports.agents import AgentRepository
from application.ports.calls import CallRepository
from application.ports.carriers import AvailableNumber, CarrierAmbiguous, CarrierError, Carriers
from application.ports.phones import PhoneNormalizer
from application.ports.platform import Clock, Page, PageRequest
from application.ports.secrets import SecretBox
from application.ports.telephony import PhoneNumberRepository, TelephonyProviderRepository
from domain.errors import Conflict, NotFound, ValidationFailed
from domain.patching import MergePatch, apply_patch, merge_patch
from domain.telephony import MAX_PROVIDER_KEYS, CallStats, PhoneNumber, TelephonyProvider, call_stats

log = logging.getLogger("parley.telephony")
T = TypeVar("T")

MAX_STATS_RANGE = timedelta(days=366)
DEFAULT_STATS_RANGE = timedelta(days=30)


async def _provider(providers: TelephonyProviderRepository, actor: Actor, provider_id: int) -> TelephonyProvider:
    found = await providers.get(actor.organization_id, provider_id)
    if found is None:
        raise NotFound("telephony provider", provider_id)
    return found


def _seal(box: SecretBox, credentials: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    return box.seal(json.dumps(credentials, sort_keys=True)), tuple(sorted(credentials))


def _open(box: SecretBox, provider: TelephonyProvider) -> dict[str, str]:
    return dict(json.loads(box.open(provider.credentials_sealed))) if provider.credentials_sealed else {}


_NOT_SENT = object()


@dataclass(frozen=True, slots=True)
class ListProvidersCommand:
    actor: Actor
    page: PageRequest


class ListProviders:
    """Every organization has the built-in simulator provider; it is created on first use."""

    def __init__(self, providers: TelephonyProviderRepository, clock: Clock) -> None:
        self.providers, self.clock = providers, clock

    async def execute(self, command: ListProvidersCommand) -> Page[TelephonyProvider]:
        actor = command.actor
        await self.providers.ensure_default(actor.organization_id, self.clock.now())
        return command.page.slice(await self.providers.list(actor.organization_id))


@dataclass(frozen=True, slots=True)
class GetProviderCommand:
    actor: Actor
    provider_id: int


class GetProvider:
    def __init__(self, providers: TelephonyProviderRepository, clock: Clock) -> None:
        self.providers, self.clock = providers, clock

    async def execute(self, command: GetProviderCommand) -> TelephonyProvider:
        await self.providers.ensure_default(command.actor.organization_id, self.clock.now())
        return await _provider(self.providers, command.actor, command.provider_id)


@dataclass(frozen=True, slots=True)
class CreateProviderCommand:
    actor: Actor
    name: str
    type: str
    credentials: dict[str, str] | None = field(default=None, repr=False)  # sealed at rest, never returned
    settings: dict[str, str] | None = None
    is_default: bool = False


class CreateProvider:
    """A carrier provider (twilio, telnyx) needs the credentials of its type (400 naming the missing ones) and
    PARLEY_PUBLIC_BASE_URL (409 public_url_required)."""

    def __init__(self, providers: TelephonyProviderRepository, box: SecretBox, clock: Clock,
                 links: CarrierLinks) -> None:
        self.providers, self.box, self.clock, self.links = providers, box, clock, links

    async def execute(self, command: CreateProviderCommand) -> TelephonyProvider:
        actor = command.actor
        if is_carrier(command.type):
            check_credentials(command.type, command.credentials)
            check_api_base_url(command.settings)
            self.links.require()
        now = self.clock.now()
        await self.providers.ensure_default(actor.organization_id, now)
        sealed, names = _seal(self.box, command.credentials) if command.credentials else (None, ())
        created = await self.providers.add(TelephonyProvider(
            None, actor.organization_id, command.name, command.type, "active", command.is_default, False, sealed,
            names, dict(command.settings or {}), now, now,
        ))
        if created.is_default:
            await self.providers.clear_default(actor.organization_id, created.id or 0)
        return created


@dataclass(frozen=True, slots=True)
class UpdateProviderCommand:
    actor: Actor
    provider_id: int
    patch: MergePatch = field(repr=False)  # may hold credentials


class UpdateProvider:
    """A merge patch: credentials and settings keep the keys not sent (null removes a key, ``credentials:
    null`` removes them all); ``is_default: true`` moves the default here."""

    def __init__(self, providers: TelephonyProviderRepository, box: SecretBox, clock: Clock,
                 links: CarrierLinks) -> None:
        self.providers, self.box, self.clock, self.links = providers, box, clock, links

    async def execute(self, command: UpdateProviderCommand) -> TelephonyProvider:
        actor, provider_id = command.actor, command.provider_id
        now = self.clock.now()
        await self.providers.ensure_default(actor.organization_id, now)
        provider = await _provider(self.providers, actor, provider_id)
        values = dict(command.patch)
        credentials_patch = values.pop("credentials", _NOT_SENT)
        if values.get("is_default") is False and provider.is_default:
            raise Conflict("An organization always has a default provider: make another one the default instead",
                           details={"provider_id": provider_id})
        if provider.builtin and "type" in values and values["type"] != provider.type:
            raise Conflict("The built-in simulator provider keeps its type", details={"provider_id": provider_id})
        patched = apply_patch(provider, values)
        if len(patched.settings) > MAX_PROVIDER_KEYS:
            raise ValidationFailed.field("settings", f"holds at most {MAX_PROVIDER_KEYS} keys")
        if credentials_patch is not _NOT_SENT:
            stored = _open(self.box, provider)
            credentials = merge_patch(stored, credentials_patch) if credentials_patch is not None else {}
            if len(credentials) > MAX_PROVIDER_KEYS:
                raise ValidationFailed.field("credentials", f"hold at most {MAX_PROVIDER_KEYS} keys")
            if credentials != stored:
                sealed, names = _seal(self.box, credentials) if credentials else (None, ())
                patched = replace(patched, credentials_sealed=sealed, credential_fields=names)
        if is_carrier(patched.type):
            if credentials_patch is not _NOT_SENT:
                check_credentials(patched.type, _open(self.box, patched) if patched.credentials_sealed else {})
            if "settings" in values:
                check_api_base_url(patched.settings)
            if values.get("is_default") and not provider.is_default:
                self.links.require()
        if patched == provider:  # a PATCH that changes nothing leaves updated_at alone
            return provider
        updated = await self.providers.update(replace(patched, updated_at=now))
        if values.get("is_default"):
            await self.providers.clear_default(actor.organization_id, provider_id)
        return updated


@dataclass(frozen=True, slots=True)
class DeleteProviderCommand:
    actor: Actor
    provider_id: int


class DeleteProvider:
    def __init__(self, providers: TelephonyProviderRepository, numbers: PhoneNumberRepository) -> None:
        self.providers, self.numbers = providers, numbers

    async def execute(self, command: DeleteProviderCommand) -> None:
        actor, provider_id = command.actor, command.provider_id
        provider = await _provider(self.providers, actor, provider_id)
        provider.ensure_deletable()
        if provider.is_default:
            raise Conflict("The default provider cannot be deleted: make another one the default first",
                           details={"provider_id": provider_id})
        if await self.numbers.count_for_provider(actor.organization_id, provider_id):
            raise Conflict("This provider still has phone numbers", details={"provider_id": provider_id})
        await self.providers.delete(actor.organization_id, provider_id)


@dataclass(frozen=True, slots=True)
class ReadProviderCredentialsCommand:
    organization_id: int
    provider_id: int


class ReadProviderCredentials:
    """For carrier adapters only (never exposed over HTTP): the opened credentials of a provider."""

    def __init__(self, providers: TelephonyProviderRepository, box: SecretBox) -> None:
        self.providers, self.box = providers, box

    async def execute(self, command: ReadProviderCredentialsCommand) -> dict[str, str]:
        provider = await self.providers.get(command.organization_id, command.provider_id)
        return _open(self.box, provider) if provider is not None else {}


async def _number(numbers: PhoneNumberRepository, actor: Actor, number_id: int) -> PhoneNumber:
    found = await numbers.get(actor.organization_id, number_id)
    if found is None:
        raise NotFound("phone number", number_id)
    return found


async def _check_refs(actor: Actor, providers: TelephonyProviderRepository, agents: AgentRepository,
                      provider_id: int | None, agent_id: int | None) -> None:
    if provider_id is not None and await providers.get(actor.organization_id, provider_id) is None:
        raise ValidationFailed.field("provider_id", f"no telephony provider {provider_id} in this organization")
    if agent_id is not None and await agents.get(actor.organization_id, agent_id) is None:
        raise ValidationFailed.field("inbound_agent_id", f"no agent {agent_id} in this organization")


@dataclass(frozen=True, slots=True)
class ListPhoneNumbersCommand:
    actor: Actor
    page: PageRequest
    provider_id: int | None = None  # None: on every provider


class ListPhoneNumbers:
    def __init__(self, numbers: PhoneNumberRepository) -> None:
        self.numbers = numbers

    async def execute(self, command: ListPhoneNumbersCommand) -> Page[PhoneNumber]:
        return command.page.slice(await self.numbers.list(command.actor.organization_id, command.provider_id))


@dataclass(frozen=True, slots=True)
class GetPhoneNumberCommand:
    actor: Actor
    number_id: int


class GetPhoneNumber:
    def __init__(self, numbers: PhoneNumberRepository) -> None:
        self.numbers = numbers

    async def execute(self, command: GetPhoneNumberCommand) -> PhoneNumber:
        return await _number(self.numbers, command.actor, command.number_id)


class CarrierNumbers:
    """A carrier provider's side of a phone number: buy, point at Parley (voice, status and SMS URLs), release,
    search. The carrier's refusals are 502 ``carrier_error`` with its own words; a carrier that did not answer is
    502 too (nothing is stored: the request may be repeated once the carrier answers)."""

    def __init__(self, carriers: Carriers, accounts: CarrierAccounts, links: CarrierLinks) -> None:
        self.carriers, self.accounts, self.links = carriers, accounts, links

    def handles(self, provider: TelephonyProvider) -> bool:
        if not is_carrier(provider.type):
            return False
        try:
            self.carriers.get(provider.type)
        except KeyError:
            return False
        return True

    async def buy(self, provider: TelephonyProvider, phone_number: str) -> None:
        self.links.require()
        await _at_carrier(self.carriers.get(provider.type).buy_number(
            self.accounts.open(provider), phone_number, self.links.numbers(provider.id or 0)))

    async def configure(self, provider: TelephonyProvider, phone_number: str) -> None:
        self.links.require()
        await _at_carrier(self.carriers.get(provider.type).configure_number(
            self.accounts.open(provider), phone_number, self.links.numbers(provider.id or 0)))

    async def release(self, provider: TelephonyProvider, phone_number: str) -> None:
        await _at_carrier(self.carriers.get(provider.type).release_number(self.accounts.open(provider), phone_number))

    async def search(self, provider: TelephonyProvider, country: str, area_code: str | None, contains: str | None,
                     limit: int) -> list[AvailableNumber]:
        return await _at_carrier(self.carriers.get(provider.type).search_numbers(
            self.accounts.open(provider), country, area_code, contains, limit))


async def _at_carrier(request: Awaitable[T]) -> T:
    try:
        return await request
    except CarrierError as exc:
        details: dict[str, object] = {"carrier_message": exc.message}
        if exc.status is not None:
            details["carrier_status"] = exc.status
        if exc.code is not None:
            details["carrier_code"] = exc.code
        raise CarrierRefused(f"carrier_error: the carrier refused: {exc.message}", details=details) from None
    except CarrierAmbiguous:
        raise CarrierRefused("carrier_error: the carrier did not answer in time; nothing was stored, try again"
                             ) from None


@dataclass(frozen=True, slots=True)
class CreatePhoneNumberCommand:
    actor: Actor
    phone_number: str
    provider_id: int | None = None  # None: the organization's default provider
    label: str | None = None
    inbound_agent_id: int | None = None
    voice: bool = True
    sms: bool = False
    purchase: bool = False
    """Buy the number from the provider's carrier first (a number ``available-numbers`` found)."""


class CreatePhoneNumber:
    """A number on a provider. On a carrier provider, Parley points the number at itself (voice, status and SMS
    URLs) at the carrier, having bought it first when ``purchase`` is true; the row is stored in the same
    transaction, so a carrier's refusal (502) leaves nothing behind."""

    def __init__(self, numbers: PhoneNumberRepository, providers: TelephonyProviderRepository,
                 agents: AgentRepository, phones: PhoneNormalizer, clock: Clock, carrier_numbers: CarrierNumbers
                 ) -> None:
        self.numbers, self.providers = numbers, providers
        self.agents, self.phones, self.clock, self.carrier_numbers = agents, phones, clock, carrier_numbers

    async def execute(self, command: CreatePhoneNumberCommand) -> PhoneNumber:
        actor = command.actor
        number = e164(self.phones, command.phone_number, "phone_number")
        now = self.clock.now()
        builtin = await self.providers.ensure_default(actor.organization_id, now)
        await _check_refs(actor, self.providers, self.agents, command.provider_id, command.inbound_agent_id)
        provider_id = command.provider_id
        provider = await self.providers.get(actor.organization_id, provider_id) if provider_id is not None else (
            await self.providers.default(actor.organization_id) or builtin)
        assert provider is not None  # checked above
        carrier = self.carrier_numbers.handles(provider)
        if command.purchase and not carrier:
            raise ValidationFailed.field("purchase", "only a twilio or telnyx provider can buy numbers")
        created = await self.numbers.add(PhoneNumber(
            None, actor.organization_id, number, provider.id or 0, command.label, command.inbound_agent_id,
            command.voice, command.sms, "active", now, now,
        ))
        if command.purchase:
            await self.carrier_numbers.buy(provider, number)
        elif carrier:
            await self.carrier_numbers.configure(provider, number)
        return created


@dataclass(frozen=True, slots=True)
class UpdatePhoneNumberCommand:
    actor: Actor
    number_id: int
    patch: MergePatch  # provider_id, label, inbound_agent_id, voice, sms


class UpdatePhoneNumber:
    """A change to a carrier number points it at Parley again at the carrier (its URLs follow the provider)."""

    def __init__(self, numbers: PhoneNumberRepository, providers: TelephonyProviderRepository,
                 agents: AgentRepository, clock: Clock, carrier_numbers: CarrierNumbers) -> None:
        self.numbers, self.providers, self.agents, self.clock = numbers, providers, agents, clock
        self.carrier_numbers = carrier_numbers

    async def execute(self, command: UpdatePhoneNumberCommand) -> PhoneNumber:
        actor, changes = command.actor, command.patch
        current = await _number(self.numbers, actor, command.number_id)
        await _check_refs(actor, self.providers, self.agents, changes.get("provider_id"),
                          changes.get("inbound_agent_id"))
        updated = apply_patch(current, changes)
        if updated == current:  # a PATCH that changes nothing leaves updated_at alone
            return current
        stored = await self.numbers.update(replace(updated, updated_at=self.clock.now()))
        if {"provider_id", "inbound_agent_id", "voice", "sms"} & set(changes):
            provider = await self.providers.get(actor.organization_id, stored.provider_id)
            if provider is not None and self.carrier_numbers.handles(provider):
                await self.carrier_numbers.configure(provider, stored.phone_number)
        return stored


@dataclass(frozen=True, slots=True)
class DeletePhoneNumberCommand:
    actor: Actor
    number_id: int
    release: bool = False
    """Also release the number at its carrier (it stops being the organization's there too)."""


class DeletePhoneNumber:
    def __init__(self, numbers: PhoneNumberRepository, providers: TelephonyProviderRepository,
                 carrier_numbers: CarrierNumbers) -> None:
        self.numbers, self.providers, self.carrier_numbers = numbers, providers, carrier_numbers

    async def execute(self, command: DeletePhoneNumberCommand) -> None:
        number = await _number(self.numbers, command.actor, command.number_id)
        await self.numbers.delete(command.actor.organization_id, command.number_id)
        if command.release:
            provider = await self.providers.get(command.actor.organization_id, number.provider_id)
            if provider is not None and self.carrier_numbers.handles(provider):
                await self.carrier_numbers.release(provider, number.phone_number)


@dataclass(frozen=True, slots=True)
class SearchAvailableNumbersCommand:
    actor: Actor
    provider_id: int
    country: str = "US"
    area_code: str | None = None
    contains: str | None = None
    limit: int = 20


class SearchAvailableNumbers:
    """GET /telephony/providers/{id}/available-numbers: numbers the provider's carrier has for sale."""

    def __init__(self, providers: TelephonyProviderRepository, carrier_numbers: CarrierNumbers) -> None:
        self.providers, self.carrier_numbers = providers, carrier_numbers

    async def execute(self, command: SearchAvailableNumbersCommand) -> list[AvailableNumber]:
        provider = await _provider(self.providers, command.actor, command.provider_id)
        if not self.carrier_numbers.handles(provider):
            raise ValidationFailed(f"provider {command.provider_id} ({provider.type}) cannot search for numbers: "
                                   "only a twilio or telnyx provider can",
                                   details={"provider_id": command.provider_id})
        return await self.carrier_numbers.search(provider, command.country.upper(), command.area_code,
                                                 command.contains, command.limit)


@dataclass(frozen=True, slots=True)
class GetTelephonyStatsCommand:
    actor: Actor
    start: datetime | None = None  # None: end - 30 days
    end: datetime | None = None    # None: now


class GetTelephonyStats:
    """Calls by status, minutes, answer rate and average duration over [start, end) (default: 30 days)."""

    def __init__(self, calls: CallRepository, clock: Clock) -> None:
        self.calls, self.clock = calls, clock

    async def execute(self, command: GetTelephonyStatsCommand) -> CallStats:
        actor = command.actor
        end = command.end or self.clock.now()
        start = command.start or end - DEFAULT_STATS_RANGE
        if start >= end:
            raise ValidationFailed.field("start", "must be before end")
        if end - start > MAX_STATS_RANGE:
            raise ValidationFailed.field("end", "the period is at most 366 days")
        counts = await self.calls.stats(actor.organization_id, start, end)
        return call_stats(start, end, counts)

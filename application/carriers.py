"""Real carriers (Twilio, Telnyx), the application's side: which providers are carriers, their credentials, the
public URLs a carrier calls back, and the outbound steps (dial, hang up, transfer, text) over the ``Carrier``
port (``application/ports/carriers.py``).

A carrier provider needs ``PARLEY_PUBLIC_BASE_URL`` (https): the carrier reaches Parley there (status callbacks,
the media stream, inbound calls and texts), and the signatures of its webhooks cover that URL. Without it a
carrier provider cannot be created or made the default, and a call cannot be placed through one (409
``public_url_required``).

Nothing here finishes a call: the use cases of ``application/calls.py`` and ``application/carrier_calls.py`` do,
with what these steps report.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, cast
from urllib.parse import quote, urlencode, urlsplit

from application.ports.carriers import (
    CARRIER_TYPES,
    CallbackUrls,
    Carrier,
    CarrierAccount,
    CarrierAmbiguous,
    CarrierDial,
    CarrierError,
    Carriers,
    NumberUrls,
    WebhookRequest,
)
from application.ports.media import MediaStreamTokens
from application.ports.secrets import SecretBox
from application.ports.telephony import PhoneNumberRepository, TelephonyProviderRepository
from domain.errors import Conflict, Forbidden, UpstreamFetchFailed, ValidationFailed
from domain.identity import persisted
from domain.telephony import PhoneNumber, PhoneNumberStatus, TelephonyProvider

log = logging.getLogger("parley.carriers")

CREDENTIAL_FIELDS: dict[str, tuple[str, ...]] = {
    "twilio": ("account_sid", "auth_token"),
    "telnyx": ("api_key", "public_key", "connection_id", "messaging_profile_id"),
}
"""The credentials each carrier type needs; sealed at rest, never returned."""
DEFAULT_API_BASE_URL = {"twilio": "https://api.twilio.com", "telnyx": "https://api.telnyx.com"}
"""The carrier's public API; a provider's ``settings.api_base_url`` replaces it (an emulator in the tests)."""
API_BASE_SETTING = "api_base_url"
RECONCILE_AFTER = timedelta(seconds=60)
"""A dial whose answer was lost is reconciled with the carrier this long after (its callbacks may tell first)."""
CALLBACK_SAFETY_CHECK = timedelta(minutes=5)
"""A carrier call not heard of for this long is looked up at the carrier (a lost callback), and so on until it
ends."""
MEDIA_STREAM_PATH = "/media-streams/"


def is_carrier(provider_type: str) -> bool:
    return provider_type in CARRIER_TYPES


class PublicUrlRequired(Conflict):
    """A carrier provider needs PARLEY_PUBLIC_BASE_URL (https) for its callbacks (409)."""

    code = "public_url_required"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (
            "public_url_required: a carrier provider (twilio, telnyx) calls Parley back at PARLEY_PUBLIC_BASE_URL, "
            "which must be set to the https address the carrier can reach (e.g. https://api.example.com)"))


class NoPhoneNumber(Conflict):
    """A carrier call needs a voice number of its provider to call from (409)."""

    code = "no_phone_number"


class CarrierRefused(UpstreamFetchFailed):
    """The carrier refused a request made for the client (a number search, a purchase): 502, its own words."""

    code = "carrier_error"


@dataclass(frozen=True, slots=True)
class CarrierLinks:
    """The public URLs a carrier calls back: ``base`` is PARLEY_PUBLIC_BASE_URL with the API prefix
    (``https://api.example.com/v2``), empty when unset. ``insecure_loopback``: an ``http`` base on a loopback host
    is accepted too (local development and tests only; ``parley check`` refuses it in production)."""

    base: str = ""
    insecure_loopback: bool = False

    @property
    def problem(self) -> str | None:
        """Why carriers cannot be used with this base (None: they can)."""
        if not self.base:
            return "PARLEY_PUBLIC_BASE_URL is not set"
        parts = urlsplit(self.base)
        if parts.scheme == "https" and parts.hostname:
            return None
        if (self.insecure_loopback and parts.scheme == "http"
                and (parts.hostname or "") in ("127.0.0.1", "localhost", "::1")):
            return None
        return f"PARLEY_PUBLIC_BASE_URL must be an https URL (it is {self.base.removesuffix('/v2')})"

    def require(self) -> None:
        problem = self.problem
        if problem is not None:
            raise PublicUrlRequired(
                f"public_url_required: {problem}; a carrier provider (twilio, telnyx) calls Parley back there, so "
                "set it to the https address the carrier can reach (e.g. https://api.example.com)")

    def url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        link = f"{self.base.rstrip('/')}{path}"
        return f"{link}?{urlencode(dict(query))}" if query else link

    def voice_status(self, provider_id: int, call_id: str | None = None) -> str:
        return self.url(f"/carriers/{provider_id}/voice/status", {"call_id": call_id} if call_id else None)

    def voice_inbound(self, provider_id: int) -> str:
        return self.url(f"/carriers/{provider_id}/voice/inbound")

    def sms(self, provider_id: int) -> str:
        return self.url(f"/carriers/{provider_id}/sms")

    def stream(self, token: str) -> str:
        """``wss://<public host>/v2/media-streams/<token>`` (``ws://`` for an http loopback base)."""
        parts = urlsplit(self.base)
        scheme = "wss" if parts.scheme == "https" else "ws"
        return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}{MEDIA_STREAM_PATH}{quote(token, safe='')}"

    def numbers(self, provider_id: int) -> NumberUrls:
        return NumberUrls(voice_url=self.voice_inbound(provider_id), voice_status_url=self.voice_status(provider_id),
                          sms_url=self.sms(provider_id))


def check_credentials(provider_type: str, credentials: Mapping[str, str] | None) -> None:
    """A carrier provider's credentials hold every field its type needs, none blank (400 naming them)."""
    needed = CREDENTIAL_FIELDS.get(provider_type)
    if needed is None:
        return
    given = credentials or {}
    missing = [name for name in needed if not str(given.get(name) or "").strip()]
    if missing:
        raise ValidationFailed.field(
            "credentials", f"a {provider_type} provider needs {', '.join(needed)}; missing: {', '.join(missing)}")


def check_api_base_url(settings: Mapping[str, str] | None) -> None:
    value = (settings or {}).get(API_BASE_SETTING)
    if value is None:
        return
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValidationFailed.field(f"settings.{API_BASE_SETTING}",
                                     "must be an http(s) URL without query, e.g. https://api.twilio.com")


OPENED_CREDENTIALS_KEPT = 256
"""How many providers' opened credentials a process keeps (``CarrierAccounts``)."""


class CarrierAccounts:
    """Opens a carrier provider for one request: its sealed credentials and its API base URL.

    One per process: the credentials it opened are kept by provider and sealed value (at most
    ``OPENED_CREDENTIALS_KEPT``, the least recently used leave first), so a carrier's webhooks do not decrypt the
    same credentials on every request. Changed credentials are sealed anew (another value): the next request
    opens those."""

    def __init__(self, box: SecretBox) -> None:
        self.box = box
        self._opened: dict[tuple[int | None, str], dict[str, str]] = {}

    def _credentials(self, provider: TelephonyProvider) -> dict[str, str]:
        sealed = provider.credentials_sealed
        if not sealed:
            return {}
        key = (provider.id, sealed)
        opened = self._opened.pop(key, None)
        if opened is None:
            opened = dict(json.loads(self.box.open(sealed)))
            while len(self._opened) >= OPENED_CREDENTIALS_KEPT:
                del self._opened[next(iter(self._opened))]
        self._opened[key] = opened  # the most recently used last
        return dict(opened)

    def open(self, provider: TelephonyProvider) -> CarrierAccount:
        credentials = self._credentials(provider)
        base = provider.settings.get(API_BASE_SETTING) or DEFAULT_API_BASE_URL.get(provider.type, "")
        return CarrierAccount(persisted(provider.id), provider.organization_id,
                              cast(Literal["twilio", "telnyx"], provider.type), credentials, base.rstrip("/"))


# ------------------------------------------------------------------------------------------------ outbound steps


@dataclass(frozen=True, slots=True)
class CarrierDialResult:
    """What a dial through a carrier did: ``carrier_call_id`` (placed), ``ambiguous`` (sent, no answer: reconcile,
    never dial again) or ``failure`` (the end reason) with the carrier's ``message``."""

    from_phone: str = ""
    carrier_call_id: str | None = None
    ambiguous: bool = False
    failure: str | None = None
    message: str | None = None
    state: dict[str, Any] = field(default_factory=dict)


def voicemail_needs_detection(action: str, message: str | None) -> bool:
    """Answering-machine detection is asked for when the agent does something on a machine: hang up, or leave its
    message (an agent that would leave an empty message talks to the machine as to a person)."""
    return action == "hangup" or (action == "leave_message" and bool(message))


def carrier_state(provider: TelephonyProvider, **values: Any) -> dict[str, Any]:
    """A carrier call's telephony state: its carrier type and provider, plus what the call has learnt."""
    return {"carrier": provider.type, "provider_id": provider.id, **values}


class CarrierCalls:
    """The outbound voice steps through a carrier provider (dial, hang up, transfer), errors turned into what the
    call use cases record."""

    def __init__(self, carriers: Carriers, accounts: CarrierAccounts, links: CarrierLinks,
                 numbers: PhoneNumberRepository, providers: TelephonyProviderRepository,
                 tokens: MediaStreamTokens) -> None:
        self.carriers, self.accounts, self.links = carriers, accounts, links
        self.numbers, self.providers, self.tokens = numbers, providers, tokens

    def carrier(self, provider: TelephonyProvider) -> Carrier:
        return self.carriers.get(provider.type)

    def supports(self, provider_type: str) -> bool:
        """Whether an adapter for this carrier type is installed."""
        try:
            self.carriers.get(provider_type)
        except KeyError:
            return False
        return True

    async def caller_id(self, organization_id: int, provider: TelephonyProvider, preferred: str | None
                        ) -> PhoneNumber | None:
        """The number a carrier call comes from: ``preferred`` (the campaign's or the agent's number) when it is an
        active voice number of the provider, else the provider's first active voice number."""
        usable = [n for n in await self.numbers.list(organization_id, provider.id)
                  if n.voice and n.status == PhoneNumberStatus.ACTIVE]
        return next((n for n in usable if n.phone_number == preferred), None) or (usable[0] if usable else None)

    async def dial(self, *, call_id: str, organization_id: int, to_phone: str, preferred_from: str | None,
                   provider: TelephonyProvider, machine_detection: bool, time_limit_seconds: int,
                   now: datetime) -> CarrierDialResult:
        if self.links.problem is not None:
            return CarrierDialResult(failure="public_url_required", message=self.links.problem)
        caller = await self.caller_id(organization_id, provider, preferred_from)
        if caller is None:
            return CarrierDialResult(failure="no_phone_number",
                                     message=f"provider {provider.id} has no active voice number to call from")
        account = self.accounts.open(provider)
        try:
            token = await self.tokens.issue(call_id, organization_id, now)
        except Exception as exc:  # the media endpoint cannot take a stream: nothing is dialled
            log.warning("no media stream for call %s: %s", call_id, exc)
            return CarrierDialResult(failure="media_unavailable", message="media streams are not available")
        urls = CallbackUrls(status_url=self.links.voice_status(persisted(provider.id), call_id),
                            stream_url=self.links.stream(token))
        request = CarrierDial(call_id=call_id, from_phone=caller.phone_number, to_phone=to_phone, urls=urls,
                              machine_detection=machine_detection, time_limit_seconds=time_limit_seconds)
        try:
            ref = await self.carrier(provider).dial(account, request)
        except CarrierAmbiguous as exc:
            log.warning("dialling call %s through provider %s: no answer from the carrier (%s); the call is "
                        "reconciled with the carrier, never dialled again", call_id, provider.id, exc)
            return CarrierDialResult(from_phone=caller.phone_number, ambiguous=True, state=carrier_state(
                provider, reconcile=True, dialled_at=now.isoformat()))
        except CarrierError as exc:
            return CarrierDialResult(from_phone=caller.phone_number, failure="carrier_error",
                                     message=exc.message[:500])
        return CarrierDialResult(from_phone=caller.phone_number, carrier_call_id=ref.carrier_call_id,
                                 state=carrier_state(provider))

    async def hang_up(self, organization_id: int, provider_id: int, carrier_call_id: str) -> None:
        """End the call at the carrier; a carrier that fails or does not answer is logged (the call ends on Parley's
        side whatever the carrier says; its late callbacks change nothing)."""
        provider = await self.providers.get(organization_id, provider_id)
        if provider is None or not is_carrier(provider.type):
            return
        try:
            await self.carrier(provider).hang_up(self.accounts.open(provider), carrier_call_id)
        except (CarrierError, CarrierAmbiguous) as exc:
            log.warning("hanging up carrier call %s of provider %s: %s", carrier_call_id, provider_id, exc)

    async def transfer(self, organization_id: int, provider_id: int, carrier_call_id: str, to_phone: str) -> None:
        """Move the live call to ``to_phone`` at the carrier (CarrierError / CarrierAmbiguous raised)."""
        provider = await self.providers.get(organization_id, provider_id)
        if provider is None or not is_carrier(provider.type):
            raise CarrierError(f"provider {provider_id} is not a carrier")
        await self.carrier(provider).transfer(self.accounts.open(provider), carrier_call_id, to_phone)


# ------------------------------------------------------------------------------------------------------ webhooks


class WebhookRejected(Forbidden):
    """A carrier webhook that is not the carrier's (a forged or altered signature, an unknown provider): 403, and
    nothing in its body is read."""

    def __init__(self) -> None:
        super().__init__("forbidden: the webhook's signature does not verify for this provider")


@dataclass(frozen=True, slots=True)
class VerifiedWebhook:
    provider: TelephonyProvider
    account: CarrierAccount
    carrier: Carrier


class CarrierWebhooks:
    """The first step of every carrier webhook: the provider it names, and the carrier's signature over the public
    URL and the raw body, checked before the body is parsed (WebhookRejected otherwise)."""

    def __init__(self, providers: TelephonyProviderRepository, accounts: CarrierAccounts, carriers: Carriers) -> None:
        self.providers, self.accounts, self.carriers = providers, accounts, carriers

    async def verify(self, provider_id: int, request: WebhookRequest, now: datetime) -> VerifiedWebhook:
        provider = await self.providers.find(provider_id)
        if provider is None or not is_carrier(provider.type) or provider.credentials_sealed is None:
            raise WebhookRejected()
        try:
            carrier = self.carriers.get(provider.type)
        except KeyError:
            raise WebhookRejected() from None
        account = self.accounts.open(provider)
        if not carrier.verify(account, request, now):
            log.info("carrier webhook for provider %s refused: its signature does not verify", provider_id)
            raise WebhookRejected()
        return VerifiedWebhook(provider, account, carrier)

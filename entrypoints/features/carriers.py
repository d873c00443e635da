"""Carriers feature: real phone calls and texts through Twilio and Telnyx, beside the simulator.

It builds the ``Carriers`` registry (carrier type -> adapter, ``ADAPTERS``; a provider of a type without an
adapter keeps ending its calls ``failed`` / ``provider_not_supported``), the public callback URLs
(``CarrierLinks`` over PARLEY_PUBLIC_BASE_URL) and the use cases of the carrier webhooks, live-call commands and
numbers, and the ``CallLine`` live media sessions hang up and transfer through (in place of the media
feature's stream-only line). Every request to a carrier goes through the one egress (``HttpxSafeHttp``).

Settings (``CarrierSettings``, ``PARLEY_CARRIER_*``): ``request_timeout_seconds`` (a carrier API request's whole
deadline; one that runs out after sending is ambiguous and reconciled, never repeated) and
``insecure_public_url`` (accept an ``http`` PARLEY_PUBLIC_BASE_URL on a loopback host: local development and the
tests; ``parley check`` refuses it in production).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from dishka import Provider, Scope, provide, provide_all

from adapters.carriers.telnyx import TelnyxCarrier
from adapters.carriers.twilio import TwilioCarrier
from adapters.egress import HttpxSafeHttp, SystemResolver
from application import carrier_calls
from application import sms as sms_cases
from application import telephony as telephony_cases
from application.calls import CarrierVoiceUpdates
from application.carriers import CarrierAccounts, CarrierCalls, CarrierLinks, CarrierWebhooks
from application.ports.carriers import Carrier, Carriers
from application.ports.egress import SafeHttp
from application.ports.media import CallLine
from application.ports.platform import Units
from entrypoints.features import Feature
from entrypoints.settings import Settings

USER_AGENT = "Parley/2.0 (carriers)"


@dataclass(frozen=True)
class CarrierSettings:
    ENV_PREFIX = "CARRIER_"

    request_timeout_seconds: float = 15.0
    """PARLEY_CARRIER_REQUEST_TIMEOUT_SECONDS: the deadline of one request to a carrier's API."""
    insecure_public_url: bool = False
    """PARLEY_CARRIER_INSECURE_PUBLIC_URL: accept an http PARLEY_PUBLIC_BASE_URL on a loopback host (development
    and tests only; carriers need https)."""


ADAPTERS: dict[str, Callable[[SafeHttp, CarrierSettings], Carrier]] = {
    "twilio": lambda http, section: TwilioCarrier(http, timeout=section.request_timeout_seconds),
    "telnyx": lambda http, section: TelnyxCarrier(http, timeout=section.request_timeout_seconds),
}
"""One line per carrier type."""


class CarrierRegistry:
    """:class:`application.ports.carriers.Carriers` over ``ADAPTERS`` (KeyError for a type without an adapter)."""

    def __init__(self, adapters: dict[str, Carrier]) -> None:
        self.adapters = adapters

    def get(self, carrier_type: str) -> Carrier:
        return self.adapters[carrier_type]


def public_links(settings: Settings, section: CarrierSettings) -> CarrierLinks:
    base = settings.public_base_url.rstrip("/")
    return CarrierLinks(f"{base}/v2" if base else "", insecure_loopback=section.insecure_public_url)


class CarriersPlatformProvider(Provider):
    scope = Scope.APP

    @provide
    async def carriers(self, settings: Settings, section: CarrierSettings) -> AsyncIterator[Carriers]:
        """The adapters share one egress, and so its pool of kept-alive connections, closed with the container."""
        http = HttpxSafeHttp(SystemResolver(), allow_loopback=settings.allow_loopback_targets, user_agent=USER_AGENT,
                             read_timeout=section.request_timeout_seconds,
                             total_timeout=section.request_timeout_seconds)
        yield CarrierRegistry({name: make(http, section) for name, make in ADAPTERS.items()})
        await http.aclose()

    @provide
    def links(self, settings: Settings, section: CarrierSettings) -> CarrierLinks:
        return public_links(settings, section)

    accounts = provide(CarrierAccounts)

    @provide
    def line(self, units: Units) -> CallLine:
        """Live media sessions hang up and transfer through the call's carrier."""
        return carrier_calls.CarrierCallLine(units)


class CarriersUseCaseProvider(Provider):
    scope = Scope.REQUEST

    helpers = provide_all(CarrierCalls, CarrierWebhooks, CarrierVoiceUpdates, telephony_cases.CarrierNumbers)
    cases = provide_all(
        carrier_calls.ReceiveVoiceStatus,
        carrier_calls.ReceiveInboundCall,
        carrier_calls.TransferCarrierCall,
        carrier_calls.HangUpCarrierCall,
        sms_cases.ReceiveCarrierSms,
        telephony_cases.SearchAvailableNumbers,
    )


FEATURE = Feature(
    name="carriers",
    providers=(CarriersPlatformProvider, CarriersUseCaseProvider),
    settings=CarrierSettings,
    overrides={CallLine: "media"},
)

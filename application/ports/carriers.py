"""Ports for real carriers (Twilio, Telnyx): calls, callbacks, SMS and numbers, one adapter per carrier type.

A carrier adapter speaks one carrier's REST API (through the one egress, :class:`application.ports.egress.SafeHttp`)
and reads its webhooks. The use cases never see the wire format: they get :class:`VoiceUpdate`,
:class:`InboundCall`, :class:`SmsUpdate` values, and the adapter's :class:`WebhookReply` to send back (TwiML for
Twilio, an empty 200 for Telnyx, which is driven by Call Control commands instead).

Every webhook is verified with :meth:`Carrier.verify` **before** its body is parsed (Twilio ``X-Twilio-Signature``;
Telnyx Ed25519 over ``timestamp|body`` within 5 minutes). Ambiguity is explicit: a request that may or may not have
reached the carrier raises :class:`CarrierAmbiguous` and is reconciled with :meth:`Carrier.find_call`, never sent
twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

CARRIER_TYPES = ("twilio", "telnyx")


class CarrierError(Exception):
    """The carrier refused or failed the request for certain (a 4xx/5xx answer, the connection refused before
    anything was sent). ``message`` is the carrier's own words, safe to show to the organization."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.code = message, status, code


class CarrierAmbiguous(Exception):
    """The request was sent and no answer came (a time-out, a dropped connection): it may have taken effect."""


@dataclass(frozen=True, slots=True)
class CarrierAccount:
    """A carrier provider opened for one request: its type, credentials (opened from the sealed box) and API base
    URL (``settings.api_base_url``, default the carrier's public API; tests point it at an emulator)."""

    provider_id: int
    organization_id: int
    type: Literal["twilio", "telnyx"]
    credentials: Mapping[str, str]
    api_base_url: str


@dataclass(frozen=True, slots=True)
class CallbackUrls:
    """Where the carrier reports: status callbacks, the media stream (with its single-use token)."""

    status_url: str
    stream_url: str
    direction: Literal["outbound", "inbound"] = "outbound"
    """What the media stream tells the session (``SessionInfo.direction``): Twilio's ``<Parameter
    name="direction">``, a ``direction`` query parameter of Telnyx's stream URL."""


@dataclass(frozen=True, slots=True)
class CarrierDial:
    call_id: str
    from_phone: str
    to_phone: str
    urls: CallbackUrls
    machine_detection: bool
    """Ask the carrier for answering-machine detection (the agent's voicemail action needs it)."""
    time_limit_seconds: int


@dataclass(frozen=True, slots=True)
class CarrierCallRef:
    carrier_call_id: str


CarrierCallState = Literal["queued", "initiated", "ringing", "answered", "completed", "busy", "no_answer", "failed",
                           "canceled"]


@dataclass(frozen=True, slots=True)
class VoiceUpdate:
    """A call's state at the carrier, from a status webhook or from :meth:`Carrier.find_call`."""

    carrier_call_id: str
    state: CarrierCallState
    at: datetime
    answered_by: Literal["human", "machine", "unknown"] | None = None
    duration_seconds: int | None = None
    error: str | None = None
    event_id: str | None = None
    """The carrier's id for this notification, when it has one (replays are recognised by it)."""


@dataclass(frozen=True, slots=True)
class InboundCall:
    carrier_call_id: str
    from_phone: str
    to_phone: str
    at: datetime


@dataclass(frozen=True, slots=True)
class WebhookRequest:
    """A webhook as received: the full public URL it was sent to (signatures cover it), headers, raw body."""

    url: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class WebhookReply:
    status: int = 200
    content_type: str = "text/plain"
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class InboundSms:
    carrier_message_id: str
    from_phone: str
    to_phone: str
    body: str
    at: datetime


@dataclass(frozen=True, slots=True)
class SmsReceipt:
    carrier_message_id: str
    status: Literal["queued", "sent", "delivered", "undelivered", "failed"]
    at: datetime
    error_code: str | None = None


SmsUpdate = InboundSms | SmsReceipt


@dataclass(frozen=True, slots=True)
class AvailableNumber:
    phone_number: str
    country: str
    region: str | None = None
    locality: str | None = None
    voice: bool = True
    sms: bool = True
    monthly_cost: str | None = None
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NumberUrls:
    voice_url: str
    voice_status_url: str
    sms_url: str


class Carrier(Protocol):
    """One carrier type's adapter. Every method that talks to the carrier raises :class:`CarrierError` or
    :class:`CarrierAmbiguous` (see the module docstring)."""

    def verify(self, account: CarrierAccount, request: WebhookRequest, now: datetime) -> bool:
        """Whether the webhook is the carrier's, unaltered (and, for Telnyx, recent)."""
        ...

    # -- voice
    async def dial(self, account: CarrierAccount, dial: CarrierDial) -> CarrierCallRef: ...

    async def find_call(self, account: CarrierAccount, call_id: str, carrier_call_id: str | None) -> VoiceUpdate | None:
        """Reconciliation: the call's state at the carrier (by its id, or by Parley's call id when the dial's
        answer was lost), or None when the carrier never created it."""
        ...

    async def hang_up(self, account: CarrierAccount, carrier_call_id: str) -> None: ...

    async def transfer(self, account: CarrierAccount, carrier_call_id: str, to_phone: str) -> None: ...

    def read_voice_webhook(self, request: WebhookRequest) -> VoiceUpdate | InboundCall | None:
        """A verified voice webhook, read; None for notifications Parley does not act on."""
        ...

    async def answer_inbound(self, account: CarrierAccount, call: InboundCall, urls: CallbackUrls) -> WebhookReply:
        """Connect an inbound call to its media stream (TwiML in the reply, or Call Control commands)."""
        ...

    async def reject_inbound(self, account: CarrierAccount, call: InboundCall) -> WebhookReply:
        """Turn an inbound call away politely (no agent answers the number, or the organization cannot take
        calls now): a busy signal (TwiML ``<Reject reason="busy"/>``, or Call Control's reject)."""
        ...

    def stream_reply(self, urls: CallbackUrls) -> WebhookReply:
        """What an outbound call's answer webhook replies when the carrier asks what to do (TwiML
        ``<Connect><Stream>``), or an empty 200 where the stream was requested at dial time."""
        ...

    # -- SMS
    async def send_sms(self, account: CarrierAccount, from_phone: str, to_phone: str, body: str,
                       status_url: str) -> str:
        """The carrier's message id."""
        ...

    def read_sms_webhook(self, request: WebhookRequest) -> SmsUpdate | None: ...

    # -- numbers
    async def search_numbers(self, account: CarrierAccount, country: str, area_code: str | None,
                             contains: str | None, limit: int) -> list[AvailableNumber]: ...

    async def buy_number(self, account: CarrierAccount, phone_number: str, urls: NumberUrls) -> str:
        """The carrier's id for the number, set up to send its calls and texts to Parley."""
        ...

    async def configure_number(self, account: CarrierAccount, phone_number: str, urls: NumberUrls) -> None: ...

    async def release_number(self, account: CarrierAccount, phone_number: str) -> None: ...


class Carriers(Protocol):
    def get(self, carrier_type: str) -> Carrier:
        """The adapter for ``twilio`` or ``telnyx`` (KeyError for any other type)."""
        ...

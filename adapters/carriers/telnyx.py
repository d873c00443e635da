"""The Telnyx carrier: Call Control v2 for voice, the Messaging API for SMS, number search and orders.

Plain HTTP through the one egress (:class:`application.ports.egress.SafeHttp`), JSON in and out, ``Authorization:
Bearer <api_key>``; Telnyx's Python SDK is not used (its client runs its own httpx connections, outside the egress,
and its webhook check reads the wall clock and needs PyNaCl: docs/telephony.md says more).

Voice: ``POST /v2/calls`` asks for the bidirectional media stream (RTP, PCMU) and answering-machine detection at
dial time and names Parley's status URL as ``webhook_url``; every event of the call then arrives there. An inbound
call arrives as ``call.initiated`` (direction ``incoming``) at the Call Control application's webhook URL and is
answered with the ``answer`` command, which asks for the stream and moves the call's later webhooks to its status
URL. Commands carry a ``command_id`` so that Telnyx ignores a repeated one.

Webhooks are signed with Ed25519 over ``"{telnyx-timestamp}|{raw body}"`` (header ``telnyx-signature-ed25519``,
base64), checked with ``cryptography``'s Ed25519 public key against the account's ``public_key`` and a 5-minute
window on either side of the clock's ``now``.

Errors: an HTTP answer of 4xx/5xx is a :class:`CarrierError` carrying Telnyx's ``errors[].detail``; no answer at
all is a :class:`CarrierError` when the request certainly did not leave (DNS, connection refused) and, for a
request that changes something (dial, SMS, number order, commands), :class:`CarrierAmbiguous` when it may have
(a time-out after sending). Reads (``GET``) that time out are plain :class:`CarrierError`: nothing took effect.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import quote, urlencode

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from application.ports.carriers import (
    AvailableNumber,
    CallbackUrls,
    CarrierAccount,
    CarrierAmbiguous,
    CarrierCallRef,
    CarrierCallState,
    CarrierDial,
    CarrierError,
    InboundCall,
    InboundSms,
    NumberUrls,
    SmsReceipt,
    SmsUpdate,
    VoiceUpdate,
    WebhookReply,
    WebhookRequest,
)
from application.ports.egress import RequestFailed, SafeHttp
from domain.errors import DomainError

log = logging.getLogger("parley.carriers.telnyx")

DEFAULT_API_BASE_URL = "https://api.telnyx.com"
SIGNATURE_HEADER = "telnyx-signature-ed25519"
TIMESTAMP_HEADER = "telnyx-timestamp"
TOLERANCE_SECONDS = 300
"""A webhook signed more than 5 minutes before (or after) the clock's ``now`` is refused."""
MIN_TIME_LIMIT, MAX_TIME_LIMIT = 30, 14_400
"""Telnyx's bounds for ``time_limit_secs``."""
ACTIVE_CALL_PAGES, ACTIVE_CALL_PAGE_SIZE = 4, 250
CLIENT_STATE_PREFIX = "parley:"
CALL_ALREADY_ENDED = "90018"
"""Telnyx's error code for a command sent to a call that has already ended."""

# hangup_cause -> Parley's carrier state; causes not listed fall back to the SIP code (see _hangup_state)
HANGUP_CAUSES: dict[str, CarrierCallState] = {
    "normal_clearing": "completed",
    "time_limit": "completed",
    "user_busy": "busy",
    "call_rejected": "busy",
    "timeout": "no_answer",
    "no_answer": "no_answer",
    "originator_cancel": "canceled",
    "not_found": "failed",
}
SIP_CAUSES: dict[str, CarrierCallState] = {
    "486": "busy", "600": "busy", "603": "busy", "408": "no_answer", "480": "no_answer", "487": "canceled",
}
AMD_RESULTS: dict[str, Literal["human", "machine", "unknown"]] = {
    "human": "human", "human_residence": "human", "human_business": "human",
    "machine": "machine", "fax_detected": "machine",
    "not_sure": "unknown", "silence": "unknown",
}
SMS_STATUSES: dict[str, Literal["queued", "sent", "delivered", "undelivered", "failed"]] = {
    "queued": "queued", "sending": "queued", "sent": "sent", "delivered": "delivered",
    "delivery_unconfirmed": "sent", "delivery_failed": "undelivered", "sending_failed": "failed",
}


def client_state(call_id: str) -> str:
    """The ``client_state`` a dial carries (base64, as Telnyx requires): Parley's call id, echoed in every webhook
    and in the active-call list, which is how :meth:`TelnyxCarrier.find_call` finds a call whose dial answer was
    lost."""
    return base64.b64encode(f"{CLIENT_STATE_PREFIX}{call_id}".encode()).decode("ascii")


def call_id_from_client_state(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        text = base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return text[len(CLIENT_STATE_PREFIX):] if text.startswith(CLIENT_STATE_PREFIX) else None


@functools.lru_cache(maxsize=256)
def _public_key(encoded: str) -> Ed25519PublicKey | None:
    try:
        raw = base64.b64decode(encoded.strip(), validate=True)
        return Ed25519PublicKey.from_public_bytes(raw) if len(raw) == 32 else None
    except (binascii.Error, ValueError):
        return None


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    for key, found in headers.items():
        if key.lower() == name:
            return found
    return None


def _instant(value: object, fallback: datetime | None = None) -> datetime | None:
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return fallback
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return fallback


def _event(body: bytes) -> tuple[str, str | None, datetime, dict[str, Any]] | None:
    """(event_type, event id, occurred_at, payload) of a webhook body, or None when it is not a Telnyx event."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, dict):
        return None
    event_type, payload = data.get("event_type"), data.get("payload")
    if not isinstance(event_type, str) or not isinstance(payload, dict):
        return None
    at = _instant(data.get("occurred_at"))
    if at is None:
        return None
    event_id = data.get("id")
    return event_type, event_id if isinstance(event_id, str) and event_id else None, at, payload


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _metadata(event: Mapping[str, Any]) -> dict[str, Any]:
    """A call event's details: its ``metadata``, or the webhook payload inside it."""
    metadata = event.get("metadata")
    if not isinstance(metadata, dict):
        return {}
    payload = metadata.get("payload")
    return payload if isinstance(payload, dict) else metadata


def _hangup_state(cause: str | None, sip: str | None) -> CarrierCallState:
    if cause in HANGUP_CAUSES:
        return HANGUP_CAUSES[cause]
    if sip in SIP_CAUSES:
        return SIP_CAUSES[sip]
    if sip and sip[:1] in ("4", "5", "6"):
        return "failed"
    return "completed"


def _error_message(status: int, body: bytes) -> tuple[str, str | None]:
    """Telnyx's own words from ``{"errors": [{code, title, detail}]}``, and the first error's code."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        document = None
    errors = document.get("errors") if isinstance(document, dict) else None
    words: list[str] = []
    code: str | None = None
    if isinstance(errors, list):
        for error in errors:
            if not isinstance(error, dict):
                continue
            if code is None and error.get("code") is not None:
                code = str(error["code"])
            said = _text(error.get("detail")) or _text(error.get("title"))
            if said and said not in words:
                words.append(said)
    if words:
        return "; ".join(words)[:500], code
    return f"Telnyx answered HTTP {status}", code


class TelnyxCarrier:
    """:class:`application.ports.carriers.Carrier` for Telnyx."""

    def __init__(self, http: SafeHttp, *, timeout: float = 10.0) -> None:
        self._http = http
        self._timeout = timeout

    # -- the wire ---------------------------------------------------------------------------------

    async def _api(self, account: CarrierAccount, method: str, path: str, *, body: Mapping[str, Any] | None = None,
                   query: Mapping[str, str | int] | None = None, not_found_ok: bool = False,
                   ended_ok: bool = False) -> dict[str, Any] | None:
        """One API request; the answer's JSON document (None for 404 when ``not_found_ok``, or for "the call has
        already ended" when ``ended_ok``). Raises CarrierError / CarrierAmbiguous as the module docstring says."""
        changes = method != "GET"
        url = account.api_base_url.rstrip("/") + path + (f"?{urlencode(query)}" if query else "")
        api_key = account.credentials.get("api_key", "")
        headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        payload = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            payload = json.dumps(body, separators=(",", ":")).encode()
        try:
            answer = await self._http.request(method, url, headers=headers, body=payload, timeout=self._timeout)
        except RequestFailed as exc:
            if exc.maybe_sent and changes:
                raise CarrierAmbiguous(f"Telnyx did not answer: {exc.message}") from None
            raise CarrierError(f"Telnyx could not be reached: {exc.message}") from None
        except DomainError as exc:  # the API base URL is malformed or not a public address
            raise CarrierError(f"the Telnyx API address is not allowed: {exc.message}") from None
        if answer.status == 404 and not_found_ok:
            return None
        if not 200 <= answer.status < 300:
            message, code = _error_message(answer.status, answer.body)
            if ended_ok and code == CALL_ALREADY_ENDED:
                return None
            raise CarrierError(message, status=answer.status, code=code)
        if not answer.body.strip():
            return {}
        try:
            document = json.loads(answer.body)
        except (ValueError, UnicodeDecodeError):
            document = None
        if not isinstance(document, dict):
            if changes:
                raise CarrierAmbiguous(f"Telnyx's answer (HTTP {answer.status}) could not be read")
            raise CarrierError(f"Telnyx's answer (HTTP {answer.status}) could not be read", status=answer.status)
        return document

    @staticmethod
    def _data(document: dict[str, Any] | None) -> dict[str, Any]:
        data = document.get("data") if document else None
        return data if isinstance(data, dict) else {}

    # -- webhooks ---------------------------------------------------------------------------------

    def verify(self, account: CarrierAccount, request: WebhookRequest, now: datetime) -> bool:
        signature = _header(request.headers, SIGNATURE_HEADER)
        timestamp = _header(request.headers, TIMESTAMP_HEADER)
        stamp = (timestamp or "").strip()
        if not signature or not stamp or len(stamp) > 12 or not stamp.isascii() or not stamp.isdigit():
            return False
        if abs(now.timestamp() - int(stamp)) > TOLERANCE_SECONDS:
            return False
        key = _public_key(account.credentials.get("public_key", ""))
        if key is None:
            return False
        try:
            raw = base64.b64decode(signature.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        if len(raw) != 64:
            return False
        try:
            key.verify(raw, stamp.encode() + b"|" + request.body)
        except InvalidSignature:
            return False
        return True

    def read_voice_webhook(self, request: WebhookRequest) -> VoiceUpdate | InboundCall | None:
        event = _event(request.body)
        if event is None:
            return None
        event_type, event_id, at, payload = event
        call = _text(payload.get("call_control_id"))
        if call is None:
            return None
        if event_type == "call.initiated":
            if payload.get("direction") == "incoming":
                source, target = _text(payload.get("from")), _text(payload.get("to"))
                if source is None or target is None:
                    return None
                return InboundCall(call, source, target, at)
            return VoiceUpdate(call, "initiated", at, event_id=event_id)
        if event_type == "call.answered":
            return VoiceUpdate(call, "answered", at, event_id=event_id)
        if event_type in ("call.machine.detection.ended", "call.machine.premium.detection.ended"):
            result = payload.get("result")
            answered_by = AMD_RESULTS.get(result, "unknown") if isinstance(result, str) else "unknown"
            return VoiceUpdate(call, "answered", at, answered_by=answered_by, event_id=event_id)
        if event_type == "call.hangup":
            cause, sip = _text(payload.get("hangup_cause")), _text(payload.get("sip_hangup_cause"))
            state = _hangup_state(cause, sip)
            error = None
            if state == "failed":
                error = f"Telnyx ended the call: {cause or 'unspecified'}" + (f" (SIP {sip})" if sip else "")
            return VoiceUpdate(call, state, at, error=error, event_id=event_id)
        return None  # streaming, playback, bridging, greeting ends...: nothing Parley acts on

    def read_sms_webhook(self, request: WebhookRequest) -> SmsUpdate | None:
        event = _event(request.body)
        if event is None:
            return None
        event_type, _event_id, at, payload = event
        message_id = _text(payload.get("id"))
        if message_id is None:
            return None
        recipients = payload.get("to")
        first = recipients[0] if isinstance(recipients, list) and recipients and isinstance(recipients[0], dict) \
            else {}
        if event_type == "message.received":
            sender = payload.get("from")
            source = _text(sender.get("phone_number")) if isinstance(sender, dict) else _text(sender)
            target = _text(first.get("phone_number"))
            if source is None or target is None:
                return None
            text = payload.get("text")
            return InboundSms(message_id, source, target, text if isinstance(text, str) else "", at)
        if event_type in ("message.sent", "message.finalized"):
            raw = _text(first.get("status")) or _text(payload.get("status"))
            status = SMS_STATUSES.get(raw or "")
            if status is None:
                status = "sent" if event_type == "message.sent" else None
            if status is None:
                return None
            error_code = None
            errors = payload.get("errors")
            if status in ("undelivered", "failed") and isinstance(errors, list) and errors \
                    and isinstance(errors[0], dict) and errors[0].get("code") is not None:
                error_code = str(errors[0]["code"])
            return SmsReceipt(message_id, status, at, error_code)
        return None

    # -- voice ------------------------------------------------------------------------------------

    @staticmethod
    def _stream(urls: CallbackUrls) -> dict[str, Any]:
        return {
            "stream_url": urls.stream_url + ("?direction=inbound" if urls.direction == "inbound" else ""),
            "stream_track": "both_tracks",
            "stream_bidirectional_mode": "rtp",
            "stream_bidirectional_codec": "PCMU",
        }

    async def dial(self, account: CarrierAccount, dial: CarrierDial) -> CarrierCallRef:
        body: dict[str, Any] = {
            "connection_id": account.credentials.get("connection_id", ""),
            "to": dial.to_phone,
            "from": dial.from_phone,
            "webhook_url": dial.urls.status_url,
            "webhook_url_method": "POST",
            **self._stream(dial.urls),
            "answering_machine_detection": "detect" if dial.machine_detection else "disabled",
            "time_limit_secs": min(max(dial.time_limit_seconds, MIN_TIME_LIMIT), MAX_TIME_LIMIT),
            "client_state": client_state(dial.call_id),
        }
        data = self._data(await self._api(account, "POST", "/v2/calls", body=body))
        carrier_call_id = _text(data.get("call_control_id"))
        if carrier_call_id is None:
            raise CarrierAmbiguous("Telnyx accepted the call without naming it (no call_control_id)")
        return CarrierCallRef(carrier_call_id)

    async def find_call(self, account: CarrierAccount, call_id: str, carrier_call_id: str | None) -> VoiceUpdate | None:
        """Telnyx's call status (``GET /v2/calls/{id}``) says whether the call is alive, not whether it was answered
        nor how it ended: the call leg's event log (``GET /v2/call_events``) does. A live call reads ``answered``
        once its log has ``call.answered``, else ``initiated``; an ended one ``completed`` (answered, its duration
        from the answer to the end) or, unanswered, its hangup cause (``no_answer`` when the log does not say).
        Without the carrier's id (the dial's answer was lost) the connection's active calls are searched for the
        ``client_state`` the dial carried; a call no longer active is not found there (None)."""
        if carrier_call_id is None:
            carrier_call_id = await self._find_active(account, call_id)
            if carrier_call_id is None:
                return None
        document = await self._api(account, "GET", f"/v2/calls/{quote(carrier_call_id, safe='')}",
                                   not_found_ok=True)
        if document is None:
            return None
        data = self._data(document)
        leg = _text(data.get("call_leg_id"))
        events = await self._leg_events(account, leg) if leg else {}
        started = _instant(data.get("start_time"))
        answered = events.get("call.answered")
        answered_at = (_instant(answered.get("event_timestamp")) or started) if answered else None
        detection = events.get("call.machine.detection.ended") or events.get("call.machine.premium.detection.ended")
        result = _metadata(detection).get("result") if detection else None
        answered_by = AMD_RESULTS.get(result, "unknown") if isinstance(result, str) else None
        alive = data.get("is_alive") is True
        hangup = events.get("call.hangup")
        duration = data.get("call_duration")
        lasted = started + timedelta(seconds=duration) if started and isinstance(duration, int) else None
        ended = None if alive else (_instant(data.get("end_time"))
                                    or (_instant(hangup.get("event_timestamp")) if hangup else None) or lasted)
        at = answered_at if alive and answered_at else (started if alive else ended)
        if at is None:  # Telnyx's answer carries no time at all: asked again later
            raise CarrierError("Telnyx's status of the call has no start or end time", code="no_call_time")
        if alive:
            if answered is None:
                return VoiceUpdate(carrier_call_id, "initiated", at)
            return VoiceUpdate(carrier_call_id, "answered", at, answered_by=answered_by)
        if answered is not None:
            seconds = max(0, int((at - answered_at).total_seconds())) if answered_at else None
            return VoiceUpdate(carrier_call_id, "completed", at, answered_by=answered_by, duration_seconds=seconds)
        details = _metadata(hangup) if hangup else {}
        cause, sip = _text(details.get("hangup_cause")), _text(details.get("sip_hangup_cause"))
        state = _hangup_state(cause, sip)
        if state == "completed":
            state = "no_answer"  # ended without ever being answered
        error = f"Telnyx ended the call: {cause or 'unspecified'}" + (f" (SIP {sip})" if sip else "") \
            if state == "failed" else None
        return VoiceUpdate(carrier_call_id, state, at, error=error)

    async def _leg_events(self, account: CarrierAccount, leg: str) -> dict[str, dict[str, Any]]:
        """The webhooks Telnyx sent for a call leg, the first of each name."""
        document = await self._api(account, "GET", "/v2/call_events",
                                   query={"filter[leg_id]": leg, "filter[type]": "webhook", "page[size]": 100})
        rows = document.get("data") if document else None
        found: dict[str, dict[str, Any]] = {}
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and isinstance(row.get("name"), str):
                found.setdefault(row["name"], row)
        return found

    async def _find_active(self, account: CarrierAccount, call_id: str) -> str | None:
        connection = quote(account.credentials.get("connection_id", ""), safe="")
        for page in range(1, ACTIVE_CALL_PAGES + 1):
            document = await self._api(account, "GET", f"/v2/connections/{connection}/active_calls",
                                       query={"page[number]": page, "page[size]": ACTIVE_CALL_PAGE_SIZE})
            calls = document.get("data") if document else None
            if not isinstance(calls, list) or not calls:
                return None
            for call in calls:
                if isinstance(call, dict) and call_id_from_client_state(call.get("client_state")) == call_id:
                    return _text(call.get("call_control_id"))
            if len(calls) < ACTIVE_CALL_PAGE_SIZE:
                return None
        return None

    async def _command(self, account: CarrierAccount, carrier_call_id: str, action: str, body: dict[str, Any],
                       *, ended_ok: bool = False) -> None:
        await self._api(account, "POST", f"/v2/calls/{quote(carrier_call_id, safe='')}/actions/{action}",
                        body=body, ended_ok=ended_ok)

    async def hang_up(self, account: CarrierAccount, carrier_call_id: str) -> None:
        """Idempotent: a call that has already ended is left as it is."""
        await self._command(account, carrier_call_id, "hangup", {"command_id": "parley-hangup"}, ended_ok=True)

    async def transfer(self, account: CarrierAccount, carrier_call_id: str, to_phone: str) -> None:
        await self._command(account, carrier_call_id, "transfer",
                            {"to": to_phone, "command_id": f"parley-transfer-{to_phone}"})

    async def answer_inbound(self, account: CarrierAccount, call: InboundCall, urls: CallbackUrls) -> WebhookReply:
        await self._command(account, call.carrier_call_id, "answer", {
            "webhook_url": urls.status_url,
            "webhook_url_method": "POST",
            **self._stream(urls),
            "command_id": "parley-answer",
        })
        return WebhookReply()

    async def reject_inbound(self, account: CarrierAccount, call: InboundCall) -> WebhookReply:
        """Call Control's ``reject`` with ``USER_BUSY``: the caller hears a busy signal. A call that has already
        ended is left as it is; a reject Telnyx refuses or does not answer is logged (the caller then hears the
        call ring out), since nothing else can be done with an inbound call Parley will not take."""
        try:
            await self._command(account, call.carrier_call_id, "reject",
                                {"cause": "USER_BUSY", "command_id": "parley-reject"}, ended_ok=True)
        except (CarrierError, CarrierAmbiguous) as exc:
            log.warning("rejecting inbound Telnyx call %s: %s", call.carrier_call_id, exc)
        return WebhookReply()

    def stream_reply(self, urls: CallbackUrls) -> WebhookReply:
        return WebhookReply()  # the stream was asked for at dial time

    # -- SMS --------------------------------------------------------------------------------------

    async def send_sms(self, account: CarrierAccount, from_phone: str, to_phone: str, body: str,
                       status_url: str) -> str:
        request: dict[str, Any] = {"from": from_phone, "to": to_phone, "text": body, "webhook_url": status_url,
                                   "use_profile_webhooks": False}
        profile = account.credentials.get("messaging_profile_id")
        if profile:
            request["messaging_profile_id"] = profile
        data = self._data(await self._api(account, "POST", "/v2/messages", body=request))
        message_id = _text(data.get("id"))
        if message_id is None:
            raise CarrierAmbiguous("Telnyx accepted the message without naming it (no id)")
        return message_id

    # -- numbers ----------------------------------------------------------------------------------

    async def search_numbers(self, account: CarrierAccount, country: str, area_code: str | None,
                             contains: str | None, limit: int) -> list[AvailableNumber]:
        query: dict[str, str | int] = {"filter[country_code]": country.upper(), "filter[limit]": limit}
        if area_code:
            query["filter[national_destination_code]"] = area_code
        if contains:
            query["filter[phone_number][contains]"] = contains
        document = await self._api(account, "GET", "/v2/available_phone_numbers", query=query)
        rows = document.get("data") if document else None
        found: list[AvailableNumber] = []
        for row in rows if isinstance(rows, list) else []:
            if not isinstance(row, dict) or _text(row.get("phone_number")) is None:
                continue
            found.append(self._available(row, country.upper()))
        return found[:limit]

    @staticmethod
    def _available(row: dict[str, Any], country: str) -> AvailableNumber:
        regions = {str(region.get("region_type")): str(region.get("region_name"))
                   for region in row.get("region_information") or [] if isinstance(region, dict)
                   and region.get("region_name")}
        features = {str(feature.get("name")) for feature in row.get("features") or [] if isinstance(feature, dict)}
        details: dict[str, str] = {}  # Telnyx's prices (decimal strings) are not passed on: money is never a float
        if regions.get("rate_center"):
            details["rate_center"] = regions["rate_center"]
        if row.get("best_effort") is True:
            details["best_effort"] = "true"  # not an exact match of the search
        return AvailableNumber(
            phone_number=str(row["phone_number"]),
            country=regions.get("country_code", country),
            region=regions.get("state"),
            locality=regions.get("location") or regions.get("rate_center"),
            voice="voice" in features or not features,
            sms="sms" in features,
            details=details,
        )

    async def _number_id(self, account: CarrierAccount, phone_number: str) -> str | None:
        document = await self._api(account, "GET", "/v2/phone_numbers",
                                   query={"filter[phone_number]": phone_number, "page[size]": 1})
        rows = document.get("data") if document else None
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("phone_number") == phone_number and _text(row.get("id")):
                return str(row["id"])
        return None

    async def buy_number(self, account: CarrierAccount, phone_number: str, urls: NumberUrls) -> str:
        body: dict[str, Any] = {"phone_numbers": [{"phone_number": phone_number}],
                                "connection_id": account.credentials.get("connection_id", "")}
        profile = account.credentials.get("messaging_profile_id")
        if profile:
            body["messaging_profile_id"] = profile
        order = self._data(await self._api(account, "POST", "/v2/number_orders", body=body))
        ordered = [row for row in order.get("phone_numbers") or [] if isinstance(row, dict)]
        if order.get("status") == "failure" or any(row.get("status") == "failure" for row in ordered):
            raise CarrierError(f"Telnyx could not order {phone_number}", code="number_order_failed")
        number_id = await self._number_id(account, phone_number)
        if number_id is not None:
            await self._point_webhooks(account, urls)
            return number_id
        await self._point_webhooks(account, urls)
        order_id = next((str(row["id"]) for row in ordered if row.get("id")), None) or _text(order.get("id"))
        if order_id is None:
            raise CarrierAmbiguous(f"Telnyx accepted the order for {phone_number} without naming it")
        return order_id

    async def configure_number(self, account: CarrierAccount, phone_number: str, urls: NumberUrls) -> None:
        """Telnyx routes a number's calls to a Call Control application and its texts to a messaging profile
        (the account's ``connection_id`` and ``messaging_profile_id``); their webhook URLs are where Telnyx sends
        the events, so Parley points them at its own."""
        number_id = await self._number_id(account, phone_number)
        if number_id is None:
            raise CarrierError(f"{phone_number} is not a number of this Telnyx account", status=404,
                               code="number_not_found")
        path = f"/v2/phone_numbers/{quote(number_id, safe='')}"
        await self._api(account, "PATCH", path, body={"connection_id": account.credentials.get("connection_id", "")})
        profile = account.credentials.get("messaging_profile_id")
        if profile:
            await self._api(account, "PATCH", f"{path}/messaging", body={"messaging_profile_id": profile})
        await self._point_webhooks(account, urls)

    async def _point_webhooks(self, account: CarrierAccount, urls: NumberUrls) -> None:
        connection = account.credentials.get("connection_id", "")
        if connection:
            path = f"/v2/call_control_applications/{quote(connection, safe='')}"
            current = self._data(await self._api(account, "GET", path))
            if current.get("webhook_event_url") != urls.voice_url:
                body: dict[str, Any] = {"webhook_event_url": urls.voice_url}
                if _text(current.get("application_name")):
                    body["application_name"] = current["application_name"]
                await self._api(account, "PATCH", path, body=body)
        profile = account.credentials.get("messaging_profile_id")
        if profile:
            path = f"/v2/messaging_profiles/{quote(profile, safe='')}"
            current = self._data(await self._api(account, "GET", path))
            if current.get("webhook_url") != urls.sms_url:
                await self._api(account, "PATCH", path, body={"webhook_url": urls.sms_url})

    async def release_number(self, account: CarrierAccount, phone_number: str) -> None:
        """Idempotent: a number the account no longer has is already released."""
        number_id = await self._number_id(account, phone_number)
        if number_id is None:
            return
        await self._api(account, "DELETE", f"/v2/phone_numbers/{quote(number_id, safe='')}", not_found_ok=True)

"""Twilio behind the ``Carrier`` port: Programmable Voice (Calls, Media Streams TwiML, answering-machine
detection), Messaging and phone numbers, over Twilio's REST API 2010-04-01.

Which parts of Twilio's official SDK (``twilio``) this uses, and why (docs/telephony.md): its pure functions only,
``twilio.request_validator.RequestValidator`` (webhook signatures: base64 HMAC-SHA1 over the full URL and the
sorted POST parameters, keyed by the auth token) and ``twilio.twiml.voice_response.VoiceResponse`` (TwiML). Its
REST client is synchronous (``requests``) and would block the event loop, so every API request goes through
Parley's one egress, ``SafeHttp.request`` (form-encoded, HTTP Basic ``account_sid:auth_token``).
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlencode

from twilio.request_validator import RequestValidator
from twilio.twiml.voice_response import Connect, VoiceResponse

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
from application.ports.egress import HttpResponse, RequestFailed, SafeHttp
from domain.errors import DomainError

API_VERSION = "2010-04-01"
SIGNATURE_HEADER = "x-twilio-signature"
STATUS_EVENTS = ("initiated", "ringing", "answered", "completed")
TWIML = "text/xml"

CALL_STATES: dict[str, CarrierCallState] = {
    "queued": "queued", "initiated": "initiated", "ringing": "ringing", "in-progress": "answered",
    "answered": "answered", "completed": "completed", "busy": "busy", "no-answer": "no_answer",
    "failed": "failed", "canceled": "canceled",
}
MACHINE = ("machine_start", "machine_end_beep", "machine_end_silence", "machine_end_other", "fax")
SMS_STATES: dict[str, Literal["queued", "sent", "delivered", "undelivered", "failed"]] = {
    "accepted": "queued", "scheduled": "queued", "queued": "queued", "sending": "queued", "sent": "sent",
    "delivered": "delivered", "read": "delivered", "undelivered": "undelivered", "failed": "failed",
    "canceled": "failed",
}


class _MultiDict:
    """POST parameters as the SDK's validator reads them (``getlist``: a parameter may repeat)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.values: dict[str, list[str]] = {}
        for name, value in pairs:
            self.values.setdefault(name, []).append(value)

    def __iter__(self) -> Any:
        return iter(self.values)

    def getlist(self, name: str) -> list[str]:
        return self.values.get(name, [])


@functools.lru_cache(maxsize=32)
def _form(body: bytes) -> tuple[tuple[str, str], ...]:
    return tuple(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def form(body: bytes) -> list[tuple[str, str]]:
    """The POST parameters (parsed once per body: a webhook is verified, then read)."""
    return list(_form(body))


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


def _instant(value: str | None) -> datetime:
    if value:
        try:
            parsed = parsedate_to_datetime(value)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except (TypeError, ValueError, IndexError):
            pass
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    return datetime.now(UTC)


def _answered_by(value: str | None) -> Literal["human", "machine", "unknown"] | None:
    if not value:
        return None
    if value in MACHINE:
        return "machine"
    return "human" if value == "human" else "unknown"


def stream_twiml(urls: CallbackUrls, call_id: str | None = None) -> str:
    """``<Connect><Stream url=...>`` (bidirectional Media Streams) with Parley's call id as a custom parameter."""
    response = VoiceResponse()
    connect = Connect()
    stream = connect.stream(url=urls.stream_url)
    if call_id:
        stream.parameter(name="call_id", value=call_id)
    if urls.direction == "inbound":
        stream.parameter(name="direction", value="inbound")
    response.append(connect)
    return str(response)


class TwilioCarrier:
    """:class:`application.ports.carriers.Carrier` for Twilio (module docstring)."""

    def __init__(self, http: SafeHttp, *, timeout: float = 15.0) -> None:
        self.http, self.timeout = http, timeout

    # -- the REST API ----------------------------------------------------------------------------------------

    @staticmethod
    def _base(account: CarrierAccount) -> str:
        sid = quote(account.credentials.get("account_sid", ""), safe="")
        return f"{account.api_base_url.rstrip('/')}/{API_VERSION}/Accounts/{sid}"

    @staticmethod
    def _auth(account: CarrierAccount) -> str:
        pair = f"{account.credentials.get('account_sid', '')}:{account.credentials.get('auth_token', '')}"
        return "Basic " + base64.b64encode(pair.encode()).decode()

    async def _call(self, account: CarrierAccount, method: str, path: str, params: list[tuple[str, str]] | None = None,
                    *, missing_ok: bool = False) -> dict[str, Any] | None:
        url = f"{self._base(account)}{path}"
        headers = {"Authorization": self._auth(account), "Accept": "application/json"}
        body = None
        if method in ("POST",) and params is not None:
            body = urlencode(params).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif params:
            url = f"{url}?{urlencode(params)}"
        try:
            response = await self.http.request(method, url, headers=headers, body=body, timeout=self.timeout)
        except RequestFailed as exc:
            if exc.maybe_sent:
                raise CarrierAmbiguous(f"Twilio did not answer: {exc.message}") from None
            raise CarrierError(f"Twilio could not be reached: {exc.message}") from None
        except DomainError as exc:  # a malformed or blocked api_base_url
            raise CarrierError(f"Twilio's API address is not usable: {exc.message}") from None
        if response.status == 404 and missing_ok:
            return None
        if response.status >= 300:
            raise self._error(response)
        if not response.body:
            return {}
        try:
            found = json.loads(response.body)
        except ValueError:
            raise CarrierError("Twilio sent an answer that is not JSON", status=response.status) from None
        return found if isinstance(found, dict) else {}

    @staticmethod
    def _error(response: HttpResponse) -> CarrierError:
        message, code = f"Twilio answered HTTP {response.status}", None
        try:
            found = json.loads(response.body)
            if isinstance(found, dict):
                message = str(found.get("message") or message)
                code = str(found["code"]) if found.get("code") is not None else None
        except ValueError:
            pass
        return CarrierError(message, status=response.status, code=code)

    # -- webhooks --------------------------------------------------------------------------------------------

    def verify(self, account: CarrierAccount, request: WebhookRequest, now: datetime) -> bool:
        signature = _header(request.headers, SIGNATURE_HEADER)
        token = account.credentials.get("auth_token")
        if not signature or not token:
            return False
        try:
            params = _MultiDict(form(request.body))
        except ValueError:
            return False
        return bool(RequestValidator(token).validate(request.url, params, signature))

    def read_voice_webhook(self, request: WebhookRequest) -> VoiceUpdate | InboundCall | None:
        params = dict(form(request.body))
        sid = params.get("CallSid")
        if not sid:
            return None
        at = _instant(params.get("Timestamp"))
        status = params.get("CallStatus")
        if status is None and params.get("AnsweredBy"):  # the asynchronous AMD callback
            return VoiceUpdate(sid, "answered", at, answered_by=_answered_by(params.get("AnsweredBy")),
                               event_id=f"{sid}:amd")
        if params.get("Direction") == "inbound" and status == "ringing":
            return InboundCall(sid, params.get("From", ""), params.get("To", ""), at)
        state = CALL_STATES.get(status or "")
        if state is None:
            return None
        duration = params.get("CallDuration")
        sequence = params.get("SequenceNumber")
        return VoiceUpdate(
            sid, state, at, answered_by=_answered_by(params.get("AnsweredBy")),
            duration_seconds=int(duration) if duration and duration.isdigit() else None,
            error=params.get("ErrorMessage") or (f"Twilio error {params['ErrorCode']}"
                                                 if params.get("ErrorCode") else None),
            event_id=f"{sid}:{sequence}" if sequence else None)

    def stream_reply(self, urls: CallbackUrls) -> WebhookReply:
        return WebhookReply(200, TWIML, stream_twiml(urls).encode())

    async def answer_inbound(self, account: CarrierAccount, call: InboundCall, urls: CallbackUrls) -> WebhookReply:
        return WebhookReply(200, TWIML, stream_twiml(urls).encode())

    async def reject_inbound(self, account: CarrierAccount, call: InboundCall) -> WebhookReply:
        response = VoiceResponse()
        response.reject(reason="busy")
        return WebhookReply(200, TWIML, str(response).encode())

    # -- voice -----------------------------------------------------------------------------------------------

    async def dial(self, account: CarrierAccount, dial: CarrierDial) -> CarrierCallRef:
        params = [("To", dial.to_phone), ("From", dial.from_phone),
                  ("Twiml", stream_twiml(dial.urls, dial.call_id)),
                  ("StatusCallback", dial.urls.status_url), ("StatusCallbackMethod", "POST"),
                  *[("StatusCallbackEvent", event) for event in STATUS_EVENTS],
                  ("TimeLimit", str(max(1, dial.time_limit_seconds)))]
        if dial.machine_detection:
            params += [("MachineDetection", "DetectMessageEnd"), ("AsyncAmd", "true"),
                       ("AsyncAmdStatusCallback", dial.urls.status_url), ("AsyncAmdStatusCallbackMethod", "POST")]
        found = await self._call(account, "POST", "/Calls.json", params)
        sid = (found or {}).get("sid")
        if not sid:
            raise CarrierError("Twilio accepted the call without a call sid")
        return CarrierCallRef(str(sid))

    async def find_call(self, account: CarrierAccount, call_id: str, carrier_call_id: str | None) -> VoiceUpdate | None:
        """By Twilio's call sid. Twilio cannot look a call up by Parley's id: a call Twilio created reports itself
        at once to its status URL (event ``initiated``, with Parley's call id in the URL), which gives Parley its
        sid; without a sid the call was never created (None)."""
        if not carrier_call_id:
            return None
        found = await self._call(account, "GET", f"/Calls/{quote(carrier_call_id, safe='')}.json", missing_ok=True)
        if found is None:
            return None
        state = CALL_STATES.get(str(found.get("status") or ""))
        if state is None:
            return None
        duration = found.get("duration")
        return VoiceUpdate(
            carrier_call_id, state, _instant(found.get("end_time") or found.get("date_updated")),
            answered_by=_answered_by(found.get("answered_by")),
            duration_seconds=int(duration) if duration not in (None, "") and str(duration).isdigit() else None)

    async def hang_up(self, account: CarrierAccount, carrier_call_id: str) -> None:
        await self._call(account, "POST", f"/Calls/{quote(carrier_call_id, safe='')}.json",
                         [("Status", "completed")])

    async def transfer(self, account: CarrierAccount, carrier_call_id: str, to_phone: str) -> None:
        response = VoiceResponse()
        response.dial(to_phone)
        await self._call(account, "POST", f"/Calls/{quote(carrier_call_id, safe='')}.json",
                         [("Twiml", str(response))])

    # -- SMS -------------------------------------------------------------------------------------------------

    async def send_sms(self, account: CarrierAccount, from_phone: str, to_phone: str, body: str,
                       status_url: str) -> str:
        found = await self._call(account, "POST", "/Messages.json", [
            ("From", from_phone), ("To", to_phone), ("Body", body), ("StatusCallback", status_url)])
        sid = (found or {}).get("sid")
        if not sid:
            raise CarrierError("Twilio accepted the message without a message sid")
        return str(sid)

    def read_sms_webhook(self, request: WebhookRequest) -> SmsUpdate | None:
        params = dict(form(request.body))
        sid = params.get("MessageSid") or params.get("SmsSid")
        if not sid:
            return None
        at = _instant(params.get("Timestamp"))
        status = params.get("MessageStatus")
        if status is not None and status != "received":
            mapped = SMS_STATES.get(status)
            if mapped is None:
                return None
            return SmsReceipt(sid, mapped, at, error_code=params.get("ErrorCode") or None)
        if "Body" in params and params.get("From") and params.get("To"):
            return InboundSms(sid, params["From"], params["To"], params["Body"], at)
        return None

    # -- numbers ---------------------------------------------------------------------------------------------

    async def search_numbers(self, account: CarrierAccount, country: str, area_code: str | None,
                             contains: str | None, limit: int) -> list[AvailableNumber]:
        params = [("PageSize", str(limit))]
        if area_code:
            params.append(("AreaCode", area_code))
        if contains:
            params.append(("Contains", contains))
        found = await self._call(account, "GET", f"/AvailablePhoneNumbers/{quote(country, safe='')}/Local.json",
                                 params) or {}
        numbers = []
        for item in found.get("available_phone_numbers") or []:
            if not isinstance(item, dict) or not item.get("phone_number"):
                continue
            capabilities = item.get("capabilities") or {}
            numbers.append(AvailableNumber(
                phone_number=str(item["phone_number"]), country=str(item.get("iso_country") or country),
                region=item.get("region") or None, locality=item.get("locality") or None,
                voice=bool(capabilities.get("voice", True)), sms=bool(capabilities.get("SMS", True)),
                details={"friendly_name": str(item["friendly_name"])} if item.get("friendly_name") else {}))
        return numbers[:limit]

    @staticmethod
    def _number_params(urls: NumberUrls) -> list[tuple[str, str]]:
        return [("VoiceUrl", urls.voice_url), ("VoiceMethod", "POST"), ("StatusCallback", urls.voice_status_url),
                ("StatusCallbackMethod", "POST"), ("SmsUrl", urls.sms_url), ("SmsMethod", "POST")]

    async def buy_number(self, account: CarrierAccount, phone_number: str, urls: NumberUrls) -> str:
        found = await self._call(account, "POST", "/IncomingPhoneNumbers.json",
                                 [("PhoneNumber", phone_number), *self._number_params(urls)])
        sid = (found or {}).get("sid")
        if not sid:
            raise CarrierError("Twilio sold the number without a number sid")
        return str(sid)

    async def _number_sid(self, account: CarrierAccount, phone_number: str) -> str | None:
        found = await self._call(account, "GET", "/IncomingPhoneNumbers.json", [("PhoneNumber", phone_number)]) or {}
        for item in found.get("incoming_phone_numbers") or []:
            if isinstance(item, dict) and item.get("phone_number") == phone_number and item.get("sid"):
                return str(item["sid"])
        return None

    async def configure_number(self, account: CarrierAccount, phone_number: str, urls: NumberUrls) -> None:
        sid = await self._number_sid(account, phone_number)
        if sid is None:
            raise CarrierError(f"{phone_number} is not a number of this Twilio account", status=404)
        await self._call(account, "POST", f"/IncomingPhoneNumbers/{quote(sid, safe='')}.json",
                         self._number_params(urls))

    async def release_number(self, account: CarrierAccount, phone_number: str) -> None:
        sid = await self._number_sid(account, phone_number)
        if sid is not None:
            await self._call(account, "DELETE", f"/IncomingPhoneNumbers/{quote(sid, safe='')}.json", missing_ok=True)

"""An emulator of Twilio for the tests: a real HTTP server on 127.0.0.1 (the standard library's threading server,
port 0) speaking the subset of Twilio's REST API 2010-04-01 Parley uses, and a client of Parley's webhooks that
signs every callback the way Twilio does, with the official SDK's ``RequestValidator``.

REST (HTTP Basic ``account_sid:auth_token``, form-encoded bodies, JSON answers and Twilio's error bodies
``{code, message, more_info, status}``): ``Calls.json`` (create, with ``Twiml``, ``StatusCallback``,
``StatusCallbackEvent``, ``MachineDetection``, ``AsyncAmd``), ``Calls/{sid}.json`` (fetch; update with ``Status``
or ``Twiml``), ``Messages.json``, ``AvailablePhoneNumbers/{country}/Local.json``, ``IncomingPhoneNumbers.json``
(buy, list by ``PhoneNumber``), ``IncomingPhoneNumbers/{sid}.json`` (update, delete).

Scripted failures: ``fail_next(kind, status, message)`` answers the next request of that kind with an error;
``hang_next(kind, create=...)`` holds the answer longer than Parley waits (having created the call first, or not).

Callbacks (``ring``, ``answer``, ``complete``, ``busy``, ``no_answer``, ``amd``, ``inbound_call``, ``sms_status``,
``inbound_sms``) are sent by the test through ``deliver`` (an httpx POST by default; the in-process HTTP tests route
them to their test client), and the hostile ones too: ``forged=True`` signs with another token, ``send(...)`` replays
what it is given. It does not open the media websocket.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import httpx
from twilio.request_validator import RequestValidator

ACCOUNT_SID = "AC" + "0" * 31 + "1"
AUTH_TOKEN = "emulated-auth-token-0123456789abcdef"

Deliver = Callable[[str, dict[str, str], dict[str, str]], Awaitable[httpx.Response]]


async def http_deliver(url: str, params: dict[str, str], headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(url, content=urlencode(params), headers={
            **headers, "Content-Type": "application/x-www-form-urlencoded"})


@dataclass
class EmulatedCall:
    sid: str
    to: str
    from_: str
    twiml: str
    status_callback: str | None
    events: list[str]
    machine_detection: str | None
    amd_callback: str | None
    time_limit: str | None
    status: str = "queued"
    answered_by: str | None = None
    duration: int | None = None
    updates: list[dict[str, str]] = field(default_factory=list)
    direction: str = "outbound-api"
    sequence: int = 0


@dataclass
class Failure:
    status: int = 500
    message: str = "Internal Server Error"
    code: int | None = None
    hang: float = 0.0
    create: bool = False


class TwilioEmulator:
    def __init__(self, account_sid: str = ACCOUNT_SID, auth_token: str = AUTH_TOKEN) -> None:
        self.account_sid, self.auth_token = account_sid, auth_token
        self.calls: dict[str, EmulatedCall] = {}
        self.messages: dict[str, dict[str, str]] = {}
        self.inventory: list[dict[str, Any]] = [
            {"phone_number": "+14155550101", "friendly_name": "(415) 555-0101", "locality": "San Francisco",
             "region": "CA", "iso_country": "US", "capabilities": {"voice": True, "SMS": True, "MMS": False}},
            {"phone_number": "+14155550177", "friendly_name": "(415) 555-0177", "locality": "San Francisco",
             "region": "CA", "iso_country": "US", "capabilities": {"voice": True, "SMS": True, "MMS": False}},
            {"phone_number": "+12125550123", "friendly_name": "(212) 555-0123", "locality": "New York",
             "region": "NY", "iso_country": "US", "capabilities": {"voice": True, "SMS": True, "MMS": False}},
        ]
        self.owned: dict[str, dict[str, str]] = {}
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []
        self.failures: dict[str, list[Failure]] = {}
        self.deliver: Deliver = http_deliver
        self.media: Any = None
        """A ``StreamingCallers`` (media_client): it opens the stream of each answered call whose TwiML has
        ``<Connect><Stream>``."""
        self.delivered: list[tuple[str, dict[str, str], int]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- the server ----------------------------------------------------------------------------------------------

    def start(self) -> TwilioEmulator:
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # the status line and headers go out before the body, in two writes: with Nagle's algorithm the body
            # waits for the client's delayed ACK (up to 40 ms) on a kept-alive connection, which a real API's
            # server does not make its clients wait
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, payload = emulator.handle(method, self.path, dict(self.headers.items()), body)
                data = json.dumps(payload).encode() if payload is not None else b""
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up waiting (a hang)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # stop() waits for the loop to look at its flag: every 50 ms, not the standard library's 0.5 s
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def credentials(self) -> dict[str, str]:
        return {"account_sid": self.account_sid, "auth_token": self.auth_token}

    def fail_next(self, kind: str, status: int = 500, message: str = "Internal Server Error",
                  code: int | None = None) -> None:
        self.failures.setdefault(kind, []).append(Failure(status, message, code))

    def hang_next(self, kind: str, seconds: float = 5.0, *, create: bool = False) -> None:
        self.failures.setdefault(kind, []).append(Failure(hang=seconds, create=create))

    def _sid(self, prefix: str) -> str:
        """Unique like Twilio's (the tests of a run share their databases)."""
        return prefix + uuid.uuid4().hex

    @staticmethod
    def _error(status: int, message: str, code: int | None = None) -> tuple[int, dict[str, Any]]:
        return status, {"code": code or status * 100, "message": message,
                        "more_info": f"https://www.twilio.com/docs/errors/{code or status * 100}", "status": status}

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes
               ) -> tuple[int, dict[str, Any] | None]:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        params = parse_qs(body.decode(), keep_blank_values=True) if body else {}
        with self._lock:
            self.requests.append((method, parts.path, params or query))
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        expected = "Basic " + base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
        if auth != expected:
            return self._error(401, "Authenticate", 20003)
        prefix = f"/2010-04-01/Accounts/{self.account_sid}"
        if not parts.path.startswith(prefix):
            return self._error(404, "The requested resource was not found", 20404)
        path = parts.path[len(prefix):]
        kind = self._kind(method, path)
        failure = self._next_failure(kind)
        one = {k: v[-1] for k, v in params.items()}
        if failure is not None and not failure.hang:
            return self._error(failure.status, failure.message, failure.code)
        result = self._route(method, path, params, one, query)
        if failure is not None and failure.hang:
            if not failure.create and kind == "calls.create" and result[1]:
                self.calls.pop(str(result[1].get("sid")), None)  # it never happened
            time.sleep(failure.hang)
        return result

    @staticmethod
    def _kind(method: str, path: str) -> str:
        if path == "/Calls.json":
            return "calls.create" if method == "POST" else "calls.list"
        if path.startswith("/Calls/"):
            return "calls.update" if method == "POST" else "calls.fetch"
        if path == "/Messages.json":
            return "messages.create"
        if path.startswith("/AvailablePhoneNumbers/"):
            return "numbers.search"
        if path.startswith("/IncomingPhoneNumbers"):
            return {"POST": "numbers.buy" if path == "/IncomingPhoneNumbers.json" else "numbers.update",
                    "GET": "numbers.list", "DELETE": "numbers.release"}[method]
        return "other"

    def _next_failure(self, kind: str) -> Failure | None:
        with self._lock:
            queue = self.failures.get(kind) or []
            return queue.pop(0) if queue else None

    def _route(self, method: str, path: str, params: dict[str, list[str]], one: dict[str, str],
               query: dict[str, list[str]]) -> tuple[int, dict[str, Any] | None]:
        if path == "/Calls.json" and method == "POST":
            if not one.get("To") or not one.get("From") or not (one.get("Twiml") or one.get("Url")):
                return self._error(400, "A 'To', 'From' and 'Twiml' or 'Url' are required", 21201)
            call = EmulatedCall(self._sid("CA"), one["To"], one["From"], one.get("Twiml", ""),
                                one.get("StatusCallback"), params.get("StatusCallbackEvent", []),
                                one.get("MachineDetection"), one.get("AsyncAmdStatusCallback"), one.get("TimeLimit"))
            self.calls[call.sid] = call
            return 201, self._call_json(call)
        if path.startswith("/Calls/") and path.endswith(".json"):
            sid = path[len("/Calls/"):-len(".json")]
            call = self.calls.get(sid)
            if call is None:
                return self._error(404, f"The requested resource /Calls/{sid}.json was not found", 20404)
            if method == "POST":
                call.updates.append(one)
                if one.get("Status") in ("completed", "canceled"):
                    call.status = "completed" if call.status == "in-progress" else "canceled"
                if one.get("Twiml"):
                    call.twiml = one["Twiml"]
            return 200, self._call_json(call)
        if path == "/Messages.json" and method == "POST":
            if not one.get("To") or not one.get("Body"):
                return self._error(400, "A 'To' phone number and a 'Body' are required", 21604)
            if one.get("To", "").endswith("0000000"):
                return self._error(400, f"The 'To' number {one['To']} is not a valid phone number.", 21211)
            sid = self._sid("SM")
            self.messages[sid] = {**one, "status": "queued"}
            return 201, {"sid": sid, "status": "queued", "to": one["To"], "from": one.get("From"), "body": one["Body"]}
        if path.startswith("/AvailablePhoneNumbers/") and method == "GET":
            area = (query.get("AreaCode") or [""])[0]
            contains = (query.get("Contains") or [""])[0]
            found = [n for n in self.inventory if n["phone_number"] not in self.owned
                     and (not area or n["phone_number"][2:5] == area) and contains in n["phone_number"]]
            return 200, {"available_phone_numbers": found, "uri": path}
        if path == "/IncomingPhoneNumbers.json" and method == "POST":
            number = one.get("PhoneNumber", "")
            if number not in {n["phone_number"] for n in self.inventory} or number in self.owned:
                return self._error(400, f"+{number.lstrip('+')} is not available", 21422)
            sid = self._sid("PN")
            self.owned[number] = {"sid": sid, "phone_number": number, **one}
            return 201, self.owned[number]
        if path == "/IncomingPhoneNumbers.json" and method == "GET":
            wanted = (query.get("PhoneNumber") or [""])[0]
            return 200, {"incoming_phone_numbers": [n for n in self.owned.values()
                                                    if not wanted or n["phone_number"] == wanted]}
        if path.startswith("/IncomingPhoneNumbers/"):
            sid = path[len("/IncomingPhoneNumbers/"):-len(".json")]
            number = next((n for n, v in self.owned.items() if v["sid"] == sid), None)
            if number is None:
                return self._error(404, "The requested resource was not found", 20404)
            if method == "DELETE":
                del self.owned[number]
                return 204, None
            self.owned[number].update(one)
            return 200, self.owned[number]
        return self._error(404, "The requested resource was not found", 20404)

    def _call_json(self, call: EmulatedCall) -> dict[str, Any]:
        return {"sid": call.sid, "account_sid": self.account_sid, "to": call.to, "from": call.from_,
                "status": call.status, "direction": call.direction, "answered_by": call.answered_by,
                "duration": str(call.duration) if call.duration is not None else None,
                "date_updated": format_datetime(datetime.now(UTC), usegmt=True)}

    # -- callbacks -----------------------------------------------------------------------------------------------

    def sign(self, url: str, params: dict[str, str], *, forged: bool = False) -> dict[str, str]:
        token = "not-the-auth-token" if forged else self.auth_token
        return {"X-Twilio-Signature": RequestValidator(token).compute_signature(url, params)}

    async def send(self, url: str, params: dict[str, str], *, forged: bool = False,
                   headers: dict[str, str] | None = None) -> httpx.Response:
        signed = headers if headers is not None else self.sign(url, params, forged=forged)
        response = await self.deliver(url, params, signed)
        self.delivered.append((url, params, response.status_code))
        return response

    def status_params(self, call: EmulatedCall, status: str, **extra: str) -> dict[str, str]:
        call.sequence += 1
        return {"AccountSid": self.account_sid, "CallSid": call.sid, "CallStatus": status, "From": call.from_,
                "To": call.to, "Direction": call.direction, "ApiVersion": "2010-04-01",
                "Timestamp": format_datetime(datetime.now(UTC), usegmt=True), "SequenceNumber": str(call.sequence),
                "CallbackSource": "call-progress-events", **extra}

    async def _status(self, sid: str, status: str, **extra: str) -> httpx.Response:
        call = self.calls[sid]
        call.status = status
        assert call.status_callback, "the call has no status callback"
        return await self.send(call.status_callback, self.status_params(call, status, **extra))

    def only_call(self) -> EmulatedCall:
        assert len(self.calls) == 1, f"{len(self.calls)} calls at the emulator"
        return next(iter(self.calls.values()))

    async def initiate(self, sid: str) -> httpx.Response:
        return await self._status(sid, "initiated")

    async def ring(self, sid: str) -> httpx.Response:
        return await self._status(sid, "ringing")

    async def answer(self, sid: str) -> httpx.Response:
        answered = await self._status(sid, "in-progress")
        await self._stream(self.calls[sid])
        return answered

    async def _stream(self, call: EmulatedCall) -> None:
        """``<Connect><Stream url>``: Twilio opens the media stream with the ``<Parameter>``s as custom ones."""
        if self.media is None or "<Stream" not in call.twiml:
            return
        import xml.etree.ElementTree as ET

        stream = ET.fromstring(call.twiml).find("./Connect/Stream")
        if stream is not None and stream.get("url"):
            parameters = {p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")}
            await self.media.open("twilio", stream.get("url"), call.sid, parameters)

    async def amd(self, sid: str, answered_by: str = "machine_end_beep") -> httpx.Response:
        call = self.calls[sid]
        call.answered_by = answered_by
        assert call.amd_callback, "the call did not ask for answering-machine detection"
        return await self.send(call.amd_callback, {"AccountSid": self.account_sid, "CallSid": sid,
                                                   "AnsweredBy": answered_by, "MachineDetectionDuration": "2400"})

    async def complete(self, sid: str, duration: int = 42) -> httpx.Response:
        self.calls[sid].duration = duration
        return await self._status(sid, "completed", CallDuration=str(duration))

    async def busy(self, sid: str) -> httpx.Response:
        return await self._status(sid, "busy", CallDuration="0")

    async def no_answer(self, sid: str) -> httpx.Response:
        return await self._status(sid, "no-answer", CallDuration="0")

    async def inbound_call(self, from_phone: str, to_phone: str) -> tuple[EmulatedCall, httpx.Response]:
        owned = self.owned.get(to_phone)
        assert owned is not None and owned.get("VoiceUrl"), f"{to_phone} has no VoiceUrl at the emulator"
        call = EmulatedCall(self._sid("CA"), to_phone, from_phone, "", owned.get("StatusCallback"), ["completed"],
                            None, None, None, status="ringing", direction="inbound")
        self.calls[call.sid] = call
        response = await self.send(owned["VoiceUrl"], self.status_params(call, "ringing"))
        call.twiml = response.text
        if self.media is not None and "<Connect>" in call.twiml:
            call.status = "in-progress"
            await self._stream(call)
        return call, response

    async def sms_status(self, sid: str, status: str, error_code: str | None = None) -> httpx.Response:
        message = self.messages[sid]
        message["status"] = status
        params = {"AccountSid": self.account_sid, "MessageSid": sid, "SmsSid": sid, "MessageStatus": status,
                  "SmsStatus": status, "From": message.get("From", ""), "To": message["To"], "ApiVersion": "2010-04-01"}
        if error_code:
            params["ErrorCode"] = error_code
        return await self.send(message["StatusCallback"], params)

    async def inbound_sms(self, from_phone: str, to_phone: str, body: str) -> httpx.Response:
        owned = self.owned.get(to_phone)
        assert owned is not None and owned.get("SmsUrl"), f"{to_phone} has no SmsUrl at the emulator"
        sid = self._sid("SM")
        return await self.send(owned["SmsUrl"], {
            "AccountSid": self.account_sid, "MessageSid": sid, "SmsSid": sid, "SmsMessageSid": sid,
            "From": from_phone, "To": to_phone, "Body": body, "NumMedia": "0", "SmsStatus": "received",
            "ApiVersion": "2010-04-01"})

    def own(self, phone_number: str) -> None:
        """A number already in the account (bought outside Parley)."""
        self.owned[phone_number] = {"sid": self._sid("PN"), "phone_number": phone_number}

    def requests_to(self, kind_path: str, method: str = "POST") -> list[dict[str, list[str]]]:
        return [params for m, path, params in self.requests if m == method and path.endswith(kind_path)]


def form_of(body: str) -> dict[str, str]:
    return dict(parse_qsl(body))

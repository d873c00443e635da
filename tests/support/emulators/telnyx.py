"""A Telnyx emulator: a real HTTP server on 127.0.0.1 speaking the part of Telnyx's API v2 that Parley uses, and
the webhooks Telnyx sends, signed as Telnyx signs them.

REST (``Authorization: Bearer <api_key>``, JSON, errors as ``{"errors": [{code, title, detail}]}``):
  Call Control   POST /v2/calls, GET /v2/calls/{id}, POST /v2/calls/{id}/actions/{answer,reject,hangup,
                 transfer,streaming_start} (a repeated command_id is ignored), GET /v2/connections/{id}/active_calls,
                 GET /v2/call_events (each leg's log: the webhooks sent, the commands taken)
  Messaging      POST /v2/messages
  Numbers        GET /v2/available_phone_numbers, POST /v2/number_orders, GET /v2/phone_numbers,
                 PATCH /v2/phone_numbers/{id}, PATCH /v2/phone_numbers/{id}/messaging, DELETE /v2/phone_numbers/{id}
  Webhook homes  GET/PATCH /v2/call_control_applications/{id}, GET/PATCH /v2/messaging_profiles/{id}

Webhooks: ``{"data": {"record_type": "event", "id", "event_type", "occurred_at", "payload"}, "meta": {...}}``
with ``telnyx-timestamp`` (unix seconds) and ``telnyx-signature-ed25519`` (base64 Ed25519 signature of
``"{timestamp}|{body}"``) made with the emulator's own key pair; ``public_key`` is what an account is configured
with. The test drives each call (``initiated``, ``answer``, ``busy``, ``no_answer``, ``hangup``...) and each message
(``message_sent``, ``message_finalized``, ``inbound_sms``); hostile webhooks are ``send`` with a wrong ``key``, a
stale ``timestamp``, ``tamper=True``, or ``redeliver`` of an earlier delivery (a replay).

Failures: ``fail(method, path_prefix, status)`` answers the next matching request with an error; ``hang(...)``
never answers it (``effect=True``: after doing what it asked, as a carrier whose answer is lost); a call event sent
with ``lost=True`` is logged but never delivered.

Delivery: webhooks are POSTed to their URL, or handed to ``deliver`` (a test routes them to an in-process app).
``start(thread=True)`` serves from a loop of its own, for callers whose loop blocks while Parley calls Telnyx.

The media stream (the hook the media side plugs into): when a call that asked for a stream is answered, ``media``
(a :class:`MediaHook`), if set, is started with the call (its ``stream_url`` with the single-use token, track,
mode and codec, and its ids); this module does not speak the stream protocol itself.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

API_KEY = "KEY0123456789ABCDEF_test"
CONNECTION_ID = "1494404757140276705"
MESSAGING_PROFILE_ID = "40017f8e-49bd-4f16-9e3d-ef103f916228"
_REASONS = {200: "OK", 201: "Created", 204: "No Content", 401: "Unauthorized", 404: "Not Found",
            422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable"}


def public_key_of(key: Ed25519PrivateKey) -> str:
    return base64.b64encode(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode("ascii")


def sign(key: Ed25519PrivateKey, timestamp: str, body: bytes) -> str:
    """Telnyx's webhook signature: Ed25519 over ``timestamp|body``, base64."""
    return base64.b64encode(key.sign(timestamp.encode() + b"|" + body)).decode("ascii")


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class MediaHook(Protocol):
    async def connect(self, call: EmulatedCall) -> None:
        """The carrier opens the call's media stream (``call.stream_url``) once the call is answered."""
        ...


@dataclass
class ApiRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class EmulatedCall:
    call_control_id: str
    call_leg_id: str
    call_session_id: str
    direction: str  # "outgoing" (dialled by the API) or "incoming"
    from_phone: str
    to_phone: str
    webhook_url: str | None
    connection_id: str
    started: datetime
    stream_url: str | None = None
    stream_track: str | None = None
    stream_mode: str | None = None
    stream_codec: str | None = None
    amd: str = "disabled"
    time_limit_secs: int | None = None
    client_state: str | None = None
    answered: datetime | None = None
    ended: datetime | None = None
    commands: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    """The call leg's event log (``GET /v2/call_events``): the webhooks sent and the commands taken."""
    transferred_to: list[str] = field(default_factory=list)
    hung_up_by_api: bool = False

    @property
    def alive(self) -> bool:
        return self.ended is None


@dataclass
class EmulatedMessage:
    id: str
    from_phone: str
    to_phone: str
    text: str
    webhook_url: str | None
    messaging_profile_id: str | None
    status: str = "queued"


@dataclass
class OwnedNumber:
    id: str
    phone_number: str
    connection_id: str | None
    messaging_profile_id: str | None


@dataclass
class Delivery:
    """A webhook as sent: where, its exact headers and bytes, and the receiver's answer (None: no answer)."""

    url: str
    headers: dict[str, str]
    body: bytes
    status: int | None


@dataclass
class _Script:
    method: str
    prefix: str
    status: int = 503
    errors: list[dict[str, str]] | None = None
    hang: bool = False
    effect: bool = False


class TelnyxEmulator:
    def __init__(self, *, api_key: str = API_KEY, connection_id: str = CONNECTION_ID,
                 messaging_profile_id: str = MESSAGING_PROFILE_ID, now: Callable[[], datetime] | None = None,
                 deliver: Callable[[str, dict[str, str], bytes], Awaitable[int | None]] | None = None) -> None:
        """``now``: the clock the webhooks' timestamps and ``occurred_at`` read (the test's clock); ``deliver``:
        how a webhook reaches its URL (default: an HTTP POST), returning the answer's status."""
        self.api_key = api_key
        self.connection_id = connection_id
        self.messaging_profile_id = messaging_profile_id
        self.key = Ed25519PrivateKey.generate()
        self.public_key = public_key_of(self.key)
        self.now = now or (lambda: datetime.now(UTC))
        self.deliver = deliver
        self.application: dict[str, Any] = {"id": connection_id, "record_type": "call_control_application",
                                            "application_name": "Parley voice", "webhook_event_url": None,
                                            "active": True}
        self.profile: dict[str, Any] = {"id": messaging_profile_id, "record_type": "messaging_profile",
                                        "name": "Parley texts", "webhook_url": None, "enabled": True}
        self.requests: list[ApiRequest] = []
        self.calls: dict[str, EmulatedCall] = {}
        self.messages: dict[str, EmulatedMessage] = {}
        self.numbers: dict[str, OwnedNumber] = {}
        self.unavailable: set[str] = set()
        """Numbers a number order fails for (someone else bought them first)."""
        self.deliveries: list[Delivery] = []
        self.media: MediaHook | None = None
        self._scripts: list[_Script] = []
        self._ids = itertools.count(1)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._held: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: httpx.AsyncClient | None = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, *, thread: bool = False) -> TelnyxEmulator:
        """Listen on 127.0.0.1. ``thread``: serve from an event loop of its own in a thread (needed when the
        caller's loop is blocked while Parley calls Telnyx, as under Litestar's test client)."""
        if not thread:
            await self._listen()
            return self
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="telnyx-emulator", daemon=True)
        self._thread.start()
        self._loop = loop
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._listen(), loop))
        return self

    async def _listen(self) -> None:
        self._held = asyncio.Event()
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=512)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._loop is not None and self._thread is not None:
            loop, self._loop = self._loop, None
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._stop(), loop))
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(self._thread.join, 5)
            loop.close()
        else:
            await self._stop()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _stop(self) -> None:
        if self._held is not None:
            self._held.set()
        if self._server is not None:
            server, self._server = self._server, None
            server.close()
            for writer in list(self._writers):
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)

    async def __aenter__(self) -> TelnyxEmulator:
        return await self.start()

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def credentials(self) -> dict[str, str]:
        """A Telnyx provider's credentials for this emulator."""
        return {"api_key": self.api_key, "public_key": self.public_key, "connection_id": self.connection_id,
                "messaging_profile_id": self.messaging_profile_id}

    # -- scripting ------------------------------------------------------------------------------

    def fail(self, method: str, path_prefix: str, status: int = 503, *, detail: str | None = None,
             code: str = "10007", title: str = "Unexpected error", times: int = 1) -> None:
        """The next ``times`` requests ``method path_prefix…`` answer ``status`` with a Telnyx error body (or,
        for ``detail=""``, an empty body)."""
        errors = None if detail == "" else [{"code": code, "title": title,
                                              "detail": detail or "An unexpected error occured."}]
        for _ in range(times):
            self._scripts.append(_Script(method.upper(), path_prefix, status=status, errors=errors))

    def hang(self, method: str, path_prefix: str, *, effect: bool = False, times: int = 1) -> None:
        """The next matching requests get no answer until the emulator closes; ``effect``: what they ask is done
        first (a dial whose answer is lost: the call exists)."""
        for _ in range(times):
            self._scripts.append(_Script(method.upper(), path_prefix, hang=True, effect=effect))

    def on(self, method: str, path_prefix: str = "") -> list[ApiRequest]:
        return [r for r in self.requests if r.method == method.upper() and r.path.startswith(path_prefix)]

    async def wait_for_call(self, *, to_phone: str | None = None, count: int = 1,
                            timeout: float = 10.0) -> EmulatedCall:  # noqa: ASYNC109
        """The ``count``-th call dialled (to ``to_phone``), once it has been."""
        def matching() -> list[EmulatedCall]:
            return [c for c in self.calls.values() if c.direction == "outgoing"
                    and (to_phone is None or c.to_phone == to_phone)]

        await _until(lambda: len(matching()) >= count, timeout)
        return matching()[count - 1]

    async def wait_for_message(self, *, count: int = 1, timeout: float = 10.0) -> EmulatedMessage:  # noqa: ASYNC109
        await _until(lambda: len(self.messages) >= count, timeout)
        return list(self.messages.values())[count - 1]

    # -- webhooks -------------------------------------------------------------------------------

    def event(self, event_type: str, payload: dict[str, Any], *, event_id: str | None = None,
              occurred_at: datetime | None = None) -> bytes:
        document = {"data": {"record_type": "event", "id": event_id or str(uuid.uuid4()), "event_type": event_type,
                             "occurred_at": iso(occurred_at or self.now()), "payload": payload},
                    "meta": {"attempt": 1, "delivered_to": ""}}
        return json.dumps(document, separators=(",", ":")).encode()

    def signed_headers(self, body: bytes, *, key: Ed25519PrivateKey | None = None,
                       timestamp: int | str | None = None) -> dict[str, str]:
        stamp = str(timestamp if timestamp is not None else int(self.now().timestamp()))
        return {"content-type": "application/json", "user-agent": "telnyx-webhooks",
                "telnyx-timestamp": stamp, "telnyx-signature-ed25519": sign(key or self.key, stamp, body)}

    async def send(self, url: str, event_type: str, payload: dict[str, Any], *, event_id: str | None = None,
                   occurred_at: datetime | None = None, key: Ed25519PrivateKey | None = None,
                   timestamp: int | str | None = None, tamper: bool = False) -> Delivery:
        """One webhook to ``url``; ``key`` another key (a forgery), ``timestamp`` another time (a stale one),
        ``tamper`` the body changed after signing."""
        body = self.event(event_type, payload, event_id=event_id, occurred_at=occurred_at)
        headers = self.signed_headers(body, key=key, timestamp=timestamp)
        if tamper:
            body = body.replace(b'"payload":{', b'"payload":{"tampered":true,', 1)
        return await self._post(url, headers, body)

    async def redeliver(self, delivery: Delivery) -> Delivery:
        """The same request again, byte for byte (Telnyx retries; an attacker replays)."""
        return await self._post(delivery.url, dict(delivery.headers), delivery.body)

    async def _post(self, url: str, headers: dict[str, str], body: bytes) -> Delivery:
        if self.deliver is not None:
            status = await self.deliver(url, headers, body)
        else:
            if self._client is None:
                self._client = httpx.AsyncClient(timeout=10, trust_env=False)
            try:
                status = (await self._client.post(url, content=body, headers=headers)).status_code
            except httpx.HTTPError:
                status = None
        delivery = Delivery(url, headers, body, status)
        self.deliveries.append(delivery)
        return delivery

    # -- driving calls --------------------------------------------------------------------------

    def call_payload(self, call: EmulatedCall, **extra: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "call_control_id": call.call_control_id, "call_leg_id": call.call_leg_id,
            "call_session_id": call.call_session_id, "connection_id": call.connection_id,
            "from": call.from_phone, "to": call.to_phone, "direction": call.direction, "state": "parked",
            "client_state": call.client_state,
        }
        payload.update(extra)
        return payload

    def _call(self, call_control_id: str) -> EmulatedCall:
        return self.calls[call_control_id]

    def _webhook_url(self, call: EmulatedCall) -> str:
        url = call.webhook_url or self.application["webhook_event_url"]
        if not url:
            raise AssertionError(f"call {call.call_control_id} has no webhook URL")
        return str(url)

    async def call_event(self, call_control_id: str, event_type: str, *, url: str | None = None, lost: bool = False,
                         **extra: Any) -> Delivery:
        """Any event for a known call, whatever its state (a late ``call.initiated`` after the hangup...).
        ``lost``: Telnyx logs it (``GET /v2/call_events``) but the webhook never arrives."""
        call = self._call(call_control_id)
        payload = self.call_payload(call, **extra)
        call.events.append({"record_type": "call_event", "call_leg_id": call.call_leg_id,
                            "call_session_id": call.call_session_id, "event_timestamp": iso(self.now()),
                            "name": event_type, "type": "webhook", "metadata": {"payload": payload}})
        if lost:
            return Delivery(url or self._webhook_url(call), {}, b"", None)
        return await self.send(url or self._webhook_url(call), event_type, payload)

    async def initiated(self, call_control_id: str) -> Delivery:
        call = self._call(call_control_id)
        return await self.call_event(call_control_id, "call.initiated", state="bridging" if
                                     call.direction == "outgoing" else "parked", start_time=iso(call.started))

    async def ring(self, call_control_id: str) -> Delivery:
        """Telnyx has no ringing event: a dialled call's ``call.initiated`` is what says it is on its way."""
        return await self.initiated(call_control_id)

    async def answer(self, call_control_id: str, *, answered_by: str | None = None) -> list[Delivery]:
        """The callee picks up: ``call.answered``, then ``call.streaming.started`` when a stream was asked for,
        then ``call.machine.detection.ended`` (``answered_by``, default ``human``) when AMD was."""
        call = self._call(call_control_id)
        call.answered = call.answered or self.now()
        sent = [await self.call_event(call_control_id, "call.answered", state="answered",
                                      start_time=iso(call.started))]
        if call.stream_url:
            sent.append(await self.call_event(call_control_id, "call.streaming.started",
                                              stream_url=call.stream_url))
            if self.media is not None:
                self._spawn(self.media.connect(call))
        if call.amd != "disabled" or answered_by is not None:
            event = "call.machine.premium.detection.ended" if call.amd == "premium" else "call.machine.detection.ended"
            sent.append(await self.call_event(call_control_id, event, result=answered_by or "human"))
        return sent

    async def hangup(self, call_control_id: str, *, cause: str = "normal_clearing", sip: str = "16",
                     source: str = "callee", lost: bool = False) -> Delivery:
        call = self._call(call_control_id)
        call.ended = call.ended or self.now()
        return await self.call_event(call_control_id, "call.hangup", lost=lost, state="hangup", hangup_cause=cause,
                                     hangup_source=source, sip_hangup_cause=sip, start_time=iso(call.started),
                                     end_time=iso(call.ended), call_quality_stats=None)

    async def busy(self, call_control_id: str) -> Delivery:
        return await self.hangup(call_control_id, cause="user_busy", sip="486")

    async def no_answer(self, call_control_id: str) -> Delivery:
        return await self.hangup(call_control_id, cause="timeout", sip="480")

    async def rejected(self, call_control_id: str) -> Delivery:
        return await self.hangup(call_control_id, cause="call_rejected", sip="603")

    async def unreachable(self, call_control_id: str) -> Delivery:
        return await self.hangup(call_control_id, cause="not_found", sip="404")

    async def inbound_call(self, from_phone: str, to_phone: str) -> tuple[EmulatedCall, Delivery]:
        """A caller dials one of the account's numbers: ``call.initiated`` (incoming) to the Call Control
        application's webhook URL."""
        owned = next((n for n in self.numbers.values() if n.phone_number == to_phone), None)
        if owned is None or owned.connection_id != self.connection_id:
            raise AssertionError(f"{to_phone} is not routed to the Call Control application")
        call = self._new_call("incoming", from_phone, to_phone, None)
        return call, await self.initiated(call.call_control_id)

    # -- driving messages -----------------------------------------------------------------------

    def message_payload(self, message: EmulatedMessage, status: str, **extra: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "record_type": "message", "id": message.id, "direction": "outbound", "type": "SMS",
            "from": {"phone_number": message.from_phone, "carrier": "Telnyx", "line_type": "Wireless"},
            "to": [{"phone_number": message.to_phone, "status": status, "carrier": "T-Mobile USA",
                    "line_type": "Wireless"}],
            "text": message.text, "messaging_profile_id": message.messaging_profile_id, "errors": [],
            "parts": 1, "encoding": "GSM-7",
        }
        payload.update(extra)
        return payload

    async def message_sent(self, message_id: str) -> Delivery:
        message = self.messages[message_id]
        message.status = "sent"
        return await self.send(self._message_url(message), "message.sent", self.message_payload(message, "sent"))

    async def message_finalized(self, message_id: str, status: str = "delivered") -> Delivery:
        """``delivered``, ``delivery_failed``, ``sending_failed`` or ``delivery_unconfirmed``."""
        message = self.messages[message_id]
        message.status = status
        errors = [] if status in ("delivered", "delivery_unconfirmed") else [
            {"code": "40300" if status == "delivery_failed" else "40008", "title": "Blocked as spam" if
             status == "delivery_failed" else "Undeliverable", "detail": "The message could not be delivered."}]
        return await self.send(self._message_url(message), "message.finalized",
                               self.message_payload(message, status, errors=errors))

    def _message_url(self, message: EmulatedMessage) -> str:
        url = message.webhook_url or self.profile["webhook_url"]
        if not url:
            raise AssertionError(f"message {message.id} has no webhook URL")
        return str(url)

    async def inbound_sms(self, from_phone: str, to_phone: str, text: str, *, url: str | None = None) -> Delivery:
        """A text to one of the account's numbers: ``message.received`` to the messaging profile's webhook URL."""
        target = url or self.profile["webhook_url"]
        if not target:
            raise AssertionError("the messaging profile has no webhook URL")
        payload = {
            "record_type": "message", "id": str(uuid.uuid4()), "direction": "inbound", "type": "SMS",
            "from": {"phone_number": from_phone, "carrier": "T-Mobile USA", "line_type": "Wireless"},
            "to": [{"phone_number": to_phone, "status": "webhook_delivered", "carrier": "Telnyx",
                    "line_type": "Wireless"}],
            "text": text, "messaging_profile_id": self.messaging_profile_id, "received_at": iso(self.now()),
            "errors": [], "parts": 1, "encoding": "GSM-7",
        }
        return await self.send(str(target), "message.received", payload)

    # -- the HTTP server ------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            await work

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _version = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                parts = urlsplit(target)
                request = ApiRequest(method.upper(), unquote(parts.path), dict(parse_qsl(parts.query)), headers, body)
                self.requests.append(request)
                status, document = await self._answer(request)
                payload = b"" if document is None else json.dumps(document).encode()
                writer.write(
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\nx-request-id: {uuid.uuid4()}\r\n\r\n".encode() + payload)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer(self, request: ApiRequest) -> tuple[int, Any]:
        script = next((s for s in self._scripts if s.method == request.method
                       and request.path.startswith(s.prefix)), None)
        if script is not None:
            self._scripts.remove(script)
            if script.hang:
                if script.effect and self._authorized(request):
                    self._route(request)
                assert self._held is not None
                await self._held.wait()
                raise ConnectionError("the emulator closed")
            return script.status, None if script.errors is None else {"errors": script.errors}
        if not self._authorized(request):
            return 401, _errors("10009", "Authentication failed", "Could not understand the provided credentials.")
        return self._route(request)

    def _authorized(self, request: ApiRequest) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.api_key}"

    def _route(self, request: ApiRequest) -> tuple[int, Any]:
        method, segments = request.method, [s for s in request.path.split("/") if s]
        if segments[:1] != ["v2"]:
            return _not_found()
        rest = segments[1:]
        try:
            data = request.json if request.body else {}
        except ValueError:
            return 400, _errors("10015", "Bad request", "The request body is not valid JSON.")
        match method, rest:
            case "POST", ["calls"]:
                return self._dial(data)
            case "GET", ["calls", call_id]:
                return self._status(call_id)
            case "POST", ["calls", call_id, "actions", action]:
                return self._command(call_id, action, data)
            case "GET", ["call_events"]:
                return self._call_events(request.query)
            case "GET", ["connections", connection, "active_calls"]:
                return self._active_calls(connection, request.query)
            case "POST", ["messages"]:
                return self._send_message(data)
            case "GET", ["available_phone_numbers"]:
                return self._available(request.query)
            case "POST", ["number_orders"]:
                return self._order(data)
            case "GET", ["phone_numbers"]:
                return self._list_numbers(request.query)
            case "PATCH", ["phone_numbers", number_id]:
                return self._update_number(number_id, data, "connection_id")
            case "PATCH", ["phone_numbers", number_id, "messaging"]:
                return self._update_number(number_id, data, "messaging_profile_id")
            case "DELETE", ["phone_numbers", number_id]:
                owned = self.numbers.pop(number_id, None)
                return (200, {"data": _number(owned)}) if owned else _not_found()
            case ("GET" | "PATCH"), ["call_control_applications", app_id]:
                return self._settings(self.application, app_id, data if method == "PATCH" else None,
                                      ("webhook_event_url", "application_name"))
            case ("GET" | "PATCH"), ["messaging_profiles", profile_id]:
                return self._settings(self.profile, profile_id, data if method == "PATCH" else None,
                                      ("webhook_url", "name"))
        return _not_found()

    # -- handlers -------------------------------------------------------------------------------

    def _new_call(self, direction: str, from_phone: str, to_phone: str, webhook_url: str | None) -> EmulatedCall:
        serial = next(self._ids)
        call = EmulatedCall(
            call_control_id=f"v3:{base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip('=')}{serial}",
            call_leg_id=str(uuid.uuid4()), call_session_id=str(uuid.uuid4()), direction=direction,
            from_phone=from_phone, to_phone=to_phone, webhook_url=webhook_url, connection_id=self.connection_id,
            started=self.now())
        self.calls[call.call_control_id] = call
        return call

    def _dial(self, data: dict[str, Any]) -> tuple[int, Any]:
        missing = [name for name in ("connection_id", "to", "from") if not data.get(name)]
        if missing:
            return 422, _errors("10032", "Invalid parameter", f"The '{missing[0]}' parameter is required.")
        if data["connection_id"] != self.connection_id:
            return 422, _errors("10011", "Invalid connection_id",
                                "The connection_id is not a Call Control application of this account.")
        if not str(data["to"]).startswith("+"):
            return 422, _errors("90015", "Invalid destination", "The destination number is not in E.164 format.")
        call = self._new_call("outgoing", str(data["from"]), str(data["to"]), data.get("webhook_url"))
        call.stream_url = data.get("stream_url")
        call.stream_track = data.get("stream_track")
        call.stream_mode = data.get("stream_bidirectional_mode")
        call.stream_codec = data.get("stream_bidirectional_codec")
        call.amd = data.get("answering_machine_detection") or "disabled"
        call.time_limit_secs = data.get("time_limit_secs")
        call.client_state = data.get("client_state")
        return 200, {"data": {"record_type": "call", "call_control_id": call.call_control_id,
                              "call_leg_id": call.call_leg_id, "call_session_id": call.call_session_id,
                              "is_alive": False, "client_state": call.client_state}}

    def _status(self, call_id: str) -> tuple[int, Any]:
        call = self.calls.get(call_id)
        if call is None:
            return _not_found()
        now = call.ended or self.now()
        data = {"record_type": "call", "call_control_id": call.call_control_id, "call_leg_id": call.call_leg_id,
                "call_session_id": call.call_session_id, "is_alive": call.alive,
                "call_duration": int((now - call.started).total_seconds()), "client_state": call.client_state,
                "start_time": iso(call.started)}
        if call.ended is not None:
            data["end_time"] = iso(call.ended)
        return 200, {"data": data}

    def _command(self, call_id: str, action: str, data: dict[str, Any]) -> tuple[int, Any]:
        call = self.calls.get(call_id)
        if call is None:
            return _not_found()
        command_id = data.get("command_id")
        if command_id and any(name == action and body.get("command_id") == command_id
                              for name, body in call.commands):
            return 200, {"data": {"result": "ok"}}  # Telnyx ignores a repeated command_id
        if not call.alive:
            return 422, _errors("90018", "Call has already ended",
                                "This call is no longer active and can't receive commands.")
        if action not in ("answer", "reject", "hangup", "transfer", "streaming_start"):
            return _not_found()
        if action == "reject":
            if call.direction != "incoming" or call.answered is not None:
                return 422, _errors("90034", "Call already answered", "Only an unanswered inbound call can be "
                                    "rejected.")
            if data.get("cause") not in ("CALL_REJECTED", "USER_BUSY"):
                return 422, _errors("10032", "Invalid parameter", "The 'cause' parameter is invalid.")
            call.ended = self.now()
        if action == "answer":
            if call.direction != "incoming" or call.answered is not None:
                return 422, _errors("90034", "Call already answered", "This call can't be answered.")
            call.answered = self.now()
            call.webhook_url = data.get("webhook_url") or call.webhook_url
            call.client_state = data.get("client_state") or call.client_state
        if action in ("answer", "streaming_start") and data.get("stream_url"):
            call.stream_url = data["stream_url"]
            call.stream_track = data.get("stream_track")
            call.stream_mode = data.get("stream_bidirectional_mode")
            call.stream_codec = data.get("stream_bidirectional_codec")
            if action == "answer" and self.media is not None:  # an inbound call answered with its stream
                self._spawn(self.media.connect(call))
        if action == "transfer":
            if not data.get("to"):
                return 422, _errors("10032", "Invalid parameter", "The 'to' parameter is required.")
            call.transferred_to.append(str(data["to"]))
        if action == "hangup":
            call.hung_up_by_api = True
            call.ended = self.now()
        call.commands.append((action, data))
        call.events.append({"record_type": "call_event", "call_leg_id": call.call_leg_id,
                            "call_session_id": call.call_session_id, "event_timestamp": iso(self.now()),
                            "name": action, "type": "command", "metadata": data})
        return 200, {"data": {"result": "ok"}}

    def _call_events(self, query: dict[str, str]) -> tuple[int, Any]:
        leg, kind = query.get("filter[leg_id]"), query.get("filter[type]")
        size = int(query.get("page[size]", "20"))
        rows = [event for call in self.calls.values() if leg is None or call.call_leg_id == leg
                for event in call.events if kind is None or event["type"] == kind][:size]
        return 200, {"data": rows, "meta": {"total_results": len(rows), "page_number": 1, "page_size": size}}

    def _active_calls(self, connection: str, query: dict[str, str]) -> tuple[int, Any]:
        if connection != self.connection_id:
            return _not_found()
        number, size = int(query.get("page[number]", "1")), int(query.get("page[size]", "20"))
        alive = [c for c in self.calls.values() if c.alive]
        page = alive[(number - 1) * size: number * size]
        rows = [{"record_type": "call", "call_control_id": c.call_control_id, "call_leg_id": c.call_leg_id,
                 "call_session_id": c.call_session_id, "client_state": c.client_state,
                 "call_duration": int((self.now() - c.started).total_seconds())} for c in page]
        return 200, {"data": rows, "meta": {"total_items": len(alive), "page_number": number, "page_size": size}}

    def _send_message(self, data: dict[str, Any]) -> tuple[int, Any]:
        for name in ("from", "to", "text"):
            if not data.get(name):
                return 422, _errors("10032", "Invalid parameter", f"The '{name}' parameter is required.")
        message = EmulatedMessage(str(uuid.uuid4()), str(data["from"]), str(data["to"]), str(data["text"]),
                                  data.get("webhook_url"), data.get("messaging_profile_id"))
        self.messages[message.id] = message
        return 200, {"data": self.message_payload(message, "queued", webhook_url=message.webhook_url)}

    def _available(self, query: dict[str, str]) -> tuple[int, Any]:
        country = query.get("filter[country_code]", "US")
        if country != "US":
            return 200, {"data": [], "meta": {"total_results": 0, "best_effort_results": 0}}
        area = query.get("filter[national_destination_code]") or "415"
        contains = query.get("filter[phone_number][contains]") or ""
        limit = int(query.get("filter[limit]", "10"))
        owned = {n.phone_number for n in self.numbers.values()}
        candidates = [f"+1{area}555{suffix:04d}" for suffix in range(100, 200)]
        found = [n for n in candidates if contains in n[1:] and n not in owned][:limit]
        rows = [{"record_type": "available_phone_number", "phone_number": n, "best_effort": False,
                 "quickship": True, "reservable": True, "vanity_format": None,
                 "region_information": [{"region_type": "rate_center", "region_name": "SAN FRANCISCO"},
                                        {"region_type": "state", "region_name": "CA"},
                                        {"region_type": "country_code", "region_name": "US"}],
                 "cost_information": {"upfront_cost": "1.00", "monthly_cost": "1.00", "currency": "USD"},
                 "features": [{"name": "sms"}, {"name": "voice"}, {"name": "mms"}]} for n in found]
        return 200, {"data": rows, "meta": {"total_results": len(rows), "best_effort_results": 0}}

    def _order(self, data: dict[str, Any]) -> tuple[int, Any]:
        wanted = [str(row.get("phone_number")) for row in data.get("phone_numbers") or [] if isinstance(row, dict)]
        if not wanted:
            return 422, _errors("10032", "Invalid parameter", "The 'phone_numbers' parameter is required.")
        owned = {n.phone_number for n in self.numbers.values()}
        entries = []
        status = "success"
        for phone in wanted:
            if phone in self.unavailable or phone in owned:
                entries.append({"id": str(uuid.uuid4()), "phone_number": phone, "status": "failure",
                                "record_type": "number_order_phone_number"})
                status = "failure"
                continue
            number = OwnedNumber(str(1_300_000_000_000_000_000 + next(self._ids)), phone,
                                 data.get("connection_id"), data.get("messaging_profile_id"))
            self.numbers[number.id] = number
            entries.append({"id": str(uuid.uuid4()), "phone_number": phone, "status": "success",
                            "record_type": "number_order_phone_number"})
        return 200, {"data": {"id": str(uuid.uuid4()), "record_type": "number_order", "status": status,
                              "phone_numbers": entries, "phone_numbers_count": len(entries),
                              "connection_id": data.get("connection_id"),
                              "messaging_profile_id": data.get("messaging_profile_id")}}

    def _list_numbers(self, query: dict[str, str]) -> tuple[int, Any]:
        wanted = query.get("filter[phone_number]")
        rows = [_number(n) for n in self.numbers.values() if wanted is None or n.phone_number == wanted]
        return 200, {"data": rows, "meta": {"total_results": len(rows), "page_number": 1, "page_size": 20}}

    def _update_number(self, number_id: str, data: dict[str, Any], name: str) -> tuple[int, Any]:
        number = self.numbers.get(number_id)
        if number is None:
            return _not_found()
        if name in data:
            setattr(number, name, data[name])
        return 200, {"data": _number(number)}

    def _settings(self, record: dict[str, Any], wanted: str, patch: dict[str, Any] | None,
                  names: tuple[str, ...]) -> tuple[int, Any]:
        if wanted != record["id"]:
            return _not_found()
        if patch is not None:
            for name in names:
                if name in patch:
                    record[name] = patch[name]
        return 200, {"data": dict(record)}


async def _until(condition: Callable[[], bool], timeout: float) -> None:  # noqa: ASYNC109
    """Wait for something the emulator's server (perhaps on another thread's loop) does."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError
        await asyncio.sleep(0.01)


def _errors(code: str, title: str, detail: str) -> dict[str, Any]:
    return {"errors": [{"code": code, "title": title, "detail": detail}]}


def _not_found() -> tuple[int, Any]:
    return 404, _errors("10005", "Resource not found", "The requested resource or URL could not be found.")


def _number(number: OwnedNumber) -> dict[str, Any]:
    return {"record_type": "phone_number", "id": number.id, "phone_number": number.phone_number,
            "status": "active", "connection_id": number.connection_id,
            "messaging_profile_id": number.messaging_profile_id, "purchased_at": "2026-01-01T00:00:00Z"}


def unix(at: datetime) -> int:
    return int(at.timestamp())


__all__ = ["API_KEY", "CONNECTION_ID", "MESSAGING_PROFILE_ID", "ApiRequest", "Delivery", "EmulatedCall",
           "EmulatedMessage", "MediaHook", "OwnedNumber", "TelnyxEmulator", "iso", "public_key_of", "sign",
           "unix"]

"""An emulator of the subset of Stripe's documented API that Parley's Stripe adapter uses, served on 127.0.0.1 (an
ASGI app on uvicorn, port 0), so the official SDK can be pointed at it (``api_base``).

It speaks Stripe's protocol: form-encoded request bodies with bracketed keys (``metadata[k]=v``, ``card[token]``,
``payment_method_types[0]``), Bearer secret keys, JSON objects with ``object`` and ``id``, error objects
(``{"error": {"type", "code", "decline_code", "message", "param", "payment_intent"}}``) with Stripe's statuses (400
``invalid_request_error``, 401, 402 ``card_error``), and ``Idempotency-Key``: a POST sent again with the same key
gets the first response again (``Idempotent-Replayed: true``); with other parameters, 400 ``idempotency_error``.

Endpoints: ``POST /v1/customers``, ``GET /v1/customers/search`` (``metadata['k']:'v'`` queries),
``POST /v1/payment_methods`` (``type=card``, ``card[token]``), ``POST /v1/payment_methods/{id}/attach`` and
``/detach``, ``POST /v1/payment_intents`` (``confirm=true``), ``GET /v1/payment_intents/{id}``. Test tokens and
test PaymentMethods behave as Stripe documents them: ``tok_visa`` / ``pm_card_visa`` succeed,
``tok_chargeDeclined`` declines (``card_declined`` / ``generic_decline``), ``tok_chargeDeclinedInsufficientFunds``
(``insufficient_funds``), ``tok_threeDSecure2Required`` / ``pm_card_authenticationRequired`` need 3-D Secure
(``requires_action``). ``authenticate(intent_id)`` is the card holder completing it (the PaymentIntent succeeds,
as Stripe's hosted page would do). ``signed_event`` makes a webhook body and its ``Stripe-Signature`` header."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import uvicorn


@dataclass(frozen=True)
class TestCard:
    brand: str
    last4: str
    decline_code: str | None = None
    three_d_secure: bool = False


CARDS: dict[str, TestCard] = {
    "visa": TestCard("visa", "4242"),
    "mastercard": TestCard("mastercard", "4444"),
    "chargeDeclined": TestCard("visa", "0002", "generic_decline"),
    "chargeDeclinedInsufficientFunds": TestCard("visa", "9995", "insufficient_funds"),
    "threeDSecure2Required": TestCard("visa", "3220", three_d_secure=True),
    "authenticationRequired": TestCard("visa", "3184", three_d_secure=True),
}
"""By the name after ``tok_`` or ``pm_card_``."""


def _test_card(reference: str) -> TestCard | None:
    for prefix in ("tok_", "pm_card_"):
        if reference.startswith(prefix):
            return CARDS.get(reference.removeprefix(prefix))
    return None


def decode_form(body: bytes) -> dict[str, Any]:
    """Stripe's form encoding: ``a[b][c]=v`` nests, ``a[0]=v`` makes a list."""
    out: dict[str, Any] = {}
    for key, value in parse_qsl(body.decode(), keep_blank_values=True):
        parts = re.findall(r"[^\[\]]+", key)
        node: Any = out
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if isinstance(node, list):
                index = int(part)
                while len(node) <= index:
                    node.append(None)
                if last:
                    node[index] = value
                else:
                    if node[index] is None:
                        node[index] = [] if parts[i + 1].isdigit() else {}
                    node = node[index]
            elif last:
                node[part] = value
            else:
                node = node.setdefault(part, [] if parts[i + 1].isdigit() else {})
    return out


class StripeError(Exception):
    def __init__(self, status: int, kind: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.status, self.body = status, {"error": {"type": kind, "message": message, **fields}}


def _missing(param: str, what: str, ident: str) -> StripeError:
    return StripeError(400, "invalid_request_error", f"No such {what}: '{ident}'", code="resource_missing",
                       param=param)


@dataclass
class StripeEmulator:
    api_key: str = "sk_test_parley"
    customers: dict[str, dict[str, Any]] = field(default_factory=dict)
    payment_methods: dict[str, dict[str, Any]] = field(default_factory=dict)
    intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    charges: list[dict[str, Any]] = field(default_factory=list)
    """Every PaymentIntent made (never a replay): what was charged or tried."""
    requests: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    replays: int = 0
    idempotent: dict[str, tuple[str, dict[str, Any], int, dict[str, Any]]] = field(default_factory=dict)
    port: int = 0
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> StripeEmulator:
        # named TCP, the connections it accepts are too, and asyncio turns Nagle's algorithm off on them: uvicorn
        # writes an answer's head and body apart, and the body would wait for the client's delayed ACK (40 ms)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        server = self.server = uvicorn.Server(uvicorn.Config(self, lifespan="off", log_level="warning",
                                                             access_log=False))
        # a thread and event loop of its own: it answers even while the test's loop waits on the app
        self.thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
        self.thread.start()
        for _ in range(500):  # uvicorn says when it is listening by this flag only
            if server.started:
                break
            await asyncio.sleep(0.01)
        return self

    async def close(self) -> None:
        if self.server is not None and self.thread is not None:
            self.server.should_exit = True
            await asyncio.to_thread(self.thread.join, 5)

    # ------------------------------------------------------------------------------------------------ ASGI

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        query = dict(parse_qsl(scope.get("query_string", b"").decode()))
        params = decode_form(body) if method == "POST" else query
        self.requests.append((method, path, params))
        status, payload, extra = self.answer(method, path, params, headers)
        raw = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
            (b"request-id", f"req_{secrets.token_hex(7)}".encode()), *extra]})
        await send({"type": "http.response.body", "body": raw})

    def answer(self, method: str, path: str, params: dict[str, Any], headers: dict[str, str]
               ) -> tuple[int, dict[str, Any], list[tuple[bytes, bytes]]]:
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"error": {"type": "invalid_request_error", "message": "Invalid API Key provided"}}, []
        key = headers.get("idempotency-key")
        if method == "POST" and key:
            earlier = self.idempotent.get(key)
            if earlier is not None:
                first_path, first_params, status, payload = earlier
                if (first_path, first_params) != (path, params):
                    return 400, {"error": {"type": "idempotency_error", "message": (
                        "Keys for idempotent requests can only be used with the same parameters they were first "
                        "used with.")}}, []
                self.replays += 1
                return status, payload, [(b"idempotent-replayed", b"true"), (b"idempotency-key", key.encode())]
        try:
            status, payload = 200, self.route(method, path, params)
        except StripeError as error:
            status, payload = error.status, error.body
        if method == "POST" and key:
            self.idempotent[key] = (path, params, status, payload)
        return status, payload, []

    def route(self, method: str, path: str, params: dict[str, Any]) -> dict[str, Any]:
        parts = path.strip("/").split("/")
        if parts[:2] == ["v1", "customers"]:
            if method == "POST" and len(parts) == 2:
                return self.create_customer(params)
            if method == "GET" and parts[2:] == ["search"]:
                return self.search_customers(params.get("query", ""))
        if parts[:2] == ["v1", "payment_methods"]:
            if method == "POST" and len(parts) == 2:
                return self.create_payment_method(params)
            if method == "POST" and len(parts) == 4 and parts[3] == "attach":
                return self.attach(parts[2], params)
            if method == "POST" and len(parts) == 4 and parts[3] == "detach":
                return self.detach(parts[2])
        if parts[:2] == ["v1", "payment_intents"]:
            if method == "POST" and len(parts) == 2:
                return self.create_intent(params)
            if method == "GET" and len(parts) == 3:
                if parts[2] not in self.intents:
                    raise _missing("intent", "payment_intent", parts[2])
                return self.intents[parts[2]]
        raise StripeError(404, "invalid_request_error", f"Unrecognized request URL ({method}: {path})")

    # ------------------------------------------------------------------------------------------------ resources

    def create_customer(self, params: dict[str, Any]) -> dict[str, Any]:
        customer = {"id": f"cus_{secrets.token_hex(7)}", "object": "customer", "created": int(time.time()),
                    "description": params.get("description"), "metadata": params.get("metadata", {})}
        self.customers[customer["id"]] = customer
        return customer

    def search_customers(self, query: str) -> dict[str, Any]:
        found = re.fullmatch(r"metadata\['([^']+)'\]:'([^']*)'", query.strip())
        if found is None:
            raise StripeError(400, "invalid_request_error", "Unsupported search query", param="query")
        key, value = found.groups()
        data = [c for c in self.customers.values() if c["metadata"].get(key) == value]
        return {"object": "search_result", "url": "/v1/customers/search", "has_more": False, "next_page": None,
                "data": data}

    def _method(self, card: TestCard, customer: str | None = None) -> dict[str, Any]:
        method = {"id": f"pm_{secrets.token_hex(12)}", "object": "payment_method", "type": "card",
                  "customer": customer, "created": int(time.time()), "metadata": {},
                  "card": {"brand": card.brand, "last4": card.last4, "exp_month": 12, "exp_year": 2034}}
        self.payment_methods[method["id"]] = method
        return method

    def create_payment_method(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("type") != "card":
            raise StripeError(400, "invalid_request_error", "Invalid type", param="type")
        token = (params.get("card") or {}).get("token", "")
        card = _test_card(token)
        if card is None:
            raise _missing("card[token]", "token", token)
        return self._method(card)

    def attach(self, method_id: str, params: dict[str, Any]) -> dict[str, Any]:
        customer = params.get("customer", "")
        if customer not in self.customers:
            raise _missing("customer", "customer", customer)
        card = _test_card(method_id)
        if card is not None:  # a test PaymentMethod: Stripe attaches a copy of it
            method = self._method(card)
        elif method_id in self.payment_methods:
            method = self.payment_methods[method_id]
        else:
            raise _missing("payment_method", "PaymentMethod", method_id)
        if method["customer"] not in (None, customer):
            raise StripeError(400, "invalid_request_error", "The payment method is attached to another customer",
                              param="payment_method")
        method["customer"] = customer
        return method

    def detach(self, method_id: str) -> dict[str, Any]:
        method = self.payment_methods.get(method_id)
        if method is None or method["customer"] is None:
            raise _missing("payment_method", "PaymentMethod", method_id)
        method["customer"] = None
        return method

    def create_intent(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            amount = int(params.get("amount", ""))
        except ValueError:
            raise StripeError(400, "invalid_request_error", "Invalid integer", param="amount") from None
        method_id, customer = params.get("payment_method", ""), params.get("customer")
        method = self.payment_methods.get(method_id)
        if method is None:
            raise _missing("payment_method", "PaymentMethod", method_id)
        if method["customer"] != customer:
            raise StripeError(400, "invalid_request_error", "The PaymentMethod does not belong to the Customer",
                              param="payment_method")
        card = CARDS[next(k for k, c in CARDS.items() if (c.brand, c.last4) == (method["card"]["brand"],
                                                                               method["card"]["last4"]))]
        intent: dict[str, Any] = {
            "id": f"pi_{secrets.token_hex(12)}", "object": "payment_intent", "amount": amount,
            "amount_received": 0, "currency": params.get("currency"), "customer": customer,
            "payment_method": method_id, "metadata": params.get("metadata", {}), "created": int(time.time()),
            "status": "requires_confirmation", "next_action": None, "last_payment_error": None,
            "client_secret": f"pi_secret_{secrets.token_hex(8)}"}
        self.intents[intent["id"]] = intent
        self.charges.append(intent)
        if params.get("confirm") != "true":
            return intent
        if card.decline_code is not None:
            error = {"type": "card_error", "code": "card_declined", "decline_code": card.decline_code,
                     "message": "Your card was declined.", "param": ""}
            intent.update(status="requires_payment_method", last_payment_error=error)
            raise StripeError(402, "card_error", "Your card was declined.", code="card_declined",
                              decline_code=card.decline_code, payment_intent=intent)
        if card.three_d_secure:
            url = f"{self.api_base}/emulator/3ds/{intent['id']}"
            intent.update(status="requires_action", next_action=(
                {"type": "redirect_to_url", "redirect_to_url": {"url": url, "return_url": params["return_url"]}}
                if params.get("return_url") else {"type": "use_stripe_sdk", "use_stripe_sdk": {}}))
            return intent
        intent.update(status="succeeded", amount_received=amount)
        return intent

    def authenticate(self, intent_id: str) -> dict[str, Any]:
        """The card holder completes 3-D Secure: the PaymentIntent succeeds."""
        intent = self.intents[intent_id]
        intent.update(status="succeeded", amount_received=intent["amount"], next_action=None)
        return intent

    def succeeded(self) -> list[dict[str, Any]]:
        return [i for i in self.charges if i["status"] == "succeeded"]


def signed_event(event_type: str, obj: dict[str, Any], secret: str, *, at: int | None = None,
                 event_id: str | None = None) -> tuple[bytes, str]:
    """A webhook body as Stripe sends it and its ``Stripe-Signature`` (``t=...,v1=HMAC-SHA256(secret, t.body)``)."""
    payload = json.dumps({"id": event_id or f"evt_{secrets.token_hex(12)}", "object": "event", "type": event_type,
                          "api_version": "2025-01-27", "created": int(time.time()), "livemode": False,
                          "data": {"object": obj}}).encode()
    stamp = at if at is not None else int(time.time())
    signature = hmac.new(secret.encode(), f"{stamp}.".encode() + payload, hashlib.sha256).hexdigest()
    return payload, f"t={stamp},v1={signature}"

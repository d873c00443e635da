"""One place per route for its access rule and the errors it can answer with.

``endpoint`` wraps Litestar's route decorators: the route's scopes, idempotency, auth mode and
whether its response carries a secret go into ``opt`` (read by the request pipeline), and the error
responses it can give go into the OpenAPI document. Every authenticated POST honours Idempotency-Key.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import delete, get, patch, post, put, websocket
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import QueryParameter

from domain.audit import AUDITED_METHODS, action_of
from domain.idempotency import MAX_BODY_BYTES
from entrypoints.http.envelope import AuthErrorEnvelope, ErrorEnvelope
from entrypoints.http.multipart import FileForm

ACCESS = "parley_access"
STREAM = "parley_stream"  # a websocket route (``stream_endpoint``): its summary; not in the OpenAPI document
FORM = "parley_form"  # the multipart form a route reads itself (documented as its request body)
SESSION_SCHEME = "SessionCookie"  # the dashboard session's security scheme (key_or_session routes)
SESSION_COOKIE = "parley_session"
WIDGET_SCHEME = "WidgetAuth"  # a widget token, ``Authorization: Widget <token>`` (widget routes)
BODY_PARAMETER = "data"  # Litestar's name for a handler's request body
MAX_OFFSET = 2**53  # bounded, so a huge offset is a 400 and not an SQL integer overflow

# The paging parameters of every list endpoint: ``limit: Limit = 25, offset: Offset = 0``.
Limit = Annotated[int, QueryParameter(ge=1, le=100, description="Page size (1-100)")]
Offset = Annotated[int, QueryParameter(ge=0, le=MAX_OFFSET, description="Items to skip")]
Instant = Annotated[str | None, QueryParameter(max_length=64, format="date-time",
                                               description="RFC 3339 with offset or Z")]
"""A list filter's instant (``created_after``, ``created_before``), read by ``parse_instant``."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})  # every other method with a session needs the CSRF token
CSRF_HEADER = "X-CSRF-Token"
BILLING_HOLD = ("payment_required: billing holds new work, the subscription past_due for more than 7 days "
                "(pay the open invoice) or canceled (reactivate it with a plan); details.reason, "
                "details.unpaid_invoice_ids")
"""The 402 of every route the one gate's billing standing guards (new calls, SMS, campaign starts, leads, widget
contacts)."""
CSRF_FAILED = f"csrf_failed: a dashboard session sent without its {CSRF_HEADER} header (POST /auth/login's csrf_token)"
REAUTHENTICATION_REQUIRED = ("reauthentication_required: with a dashboard session, its user gave the password (or a "
                             "code) more than 5 minutes ago: POST /auth/verify first")

_DECORATORS = {"GET": get, "POST": post, "PATCH": patch, "DELETE": delete, "PUT": put}


class AuthMode(enum.StrEnum):
    """Which authenticator a route answers to (``entrypoints/http/authentication.py``)."""

    KEY = "key"                        # a Bearer API key
    KEY_OR_SESSION = "key_or_session"  # a Bearer API key, or a dashboard session
    SESSION = "session"                # a dashboard session only (signing out, describing the session)
    WIDGET = "widget"                  # a widget token
    PUBLIC = "public"                  # anyone


def auth_mode(value: AuthMode | str, where: str = "") -> AuthMode:
    """``value`` as an ``AuthMode``; an unknown mode raises (a route is refused when it is declared)."""
    try:
        return AuthMode(value)
    except ValueError:
        accepted = ", ".join(mode.value for mode in AuthMode)
        raise ValueError(f"{where + ': ' if where else ''}unknown auth mode {value!r} (one of {accepted})") from None


@dataclass(frozen=True, slots=True)
class Access:
    """Who may call a route. ``scopes``: the alternatives, any one of which authorizes
    (each also granted by its family wildcard and by ``*``)."""

    scopes: tuple[str, ...] = ()
    auth: AuthMode = AuthMode.KEY
    idempotent: bool = False
    # the success response carries a secret (a new API key, a signing secret, a token): a stored replay of
    # it is sealed, and every response of the route says Cache-Control: no-store
    secret: bool = False
    # accepts bodies larger than an Idempotency-Key covers: sent with one, those get 400 idempotency_unsupported
    large_body: bool = False
    # where a 201 points (Location): a path under the API prefix, ``{field}`` from the response's ``data``,
    # ``{path.name}`` from the request's path parameters, e.g. "/knowledge-bases/{path.id}/documents/{id}"
    location: str | None = None
    # with a dashboard session: only within 5 minutes of its user giving the password (or a code) at sign-in or
    # at POST /auth/verify (minting keys, changing billing, managing users), else 403 reauthentication_required
    sudo: bool = False
    # what its audit events call a state-changing request made with a key or by a user (``domain/audit.py``,
    # from the operation id: ``updateAgent`` -> ``agent.updated``); None: not audited (a safe method, a widget or
    # public route)
    action: str | None = None

    @property
    def public(self) -> bool:
        return self.auth is AuthMode.PUBLIC

    def __post_init__(self) -> None:
        object.__setattr__(self, "auth", auth_mode(self.auth))


_DESCRIPTIONS = {
    400: "Invalid body, parameter or header (bad_request, with details.validation_errors)",
    401: "Missing or invalid API key (MISSING_AUTH, INVALID_API_KEY)",
    403: "Scope missing (INSUFFICIENT_SCOPE) or sub-organization not allowed (sub_org_forbidden)",
    404: "Unknown id (not_found)",
    409: "Conflict",
    413: "Request body too large (payload_too_large)",
    415: "Unsupported media type (unsupported_media_type)",
    422: "Unprocessable request",
    429: "Rate limit exceeded (RATE_LIMIT_EXCEEDED); see Retry-After",
    502: "Upstream fetch failed (upstream_fetch_failed)",
}
_WIDGET_DESCRIPTIONS = {
    401: "Missing, expired or invalid widget token (MISSING_AUTH, INVALID_WIDGET_TOKEN); a Bearer key is refused",
    403: "origin_not_allowed: the request's Origin is missing or not one of the token's allowed origins",
    429: "The token's 20 requests a minute are spent (RATE_LIMIT_EXCEEDED); see Retry-After",
}
_AUTH_STATUSES = {401, 429}
_IDEMPOTENCY_UNSUPPORTED = (f"idempotency_unsupported: an Idempotency-Key with a body over "
                            f"{MAX_BODY_BYTES // 2**20} MB (send such a body without one)")


def _envelope_of(status: int, access: Access, errors: dict[int, str]) -> Any:
    """The error body a status comes in: 401 and the rate limit's 429 in the auth envelope, the rest in the router
    envelope; a widget route that declares a 429 of its own (the intake caps, ``widget_intake_limited`` with
    details) answers 429 in either."""
    if status == 429 and status in errors and access.auth is AuthMode.WIDGET:
        return AuthErrorEnvelope | ErrorEnvelope
    return AuthErrorEnvelope if status in _AUTH_STATUSES else ErrorEnvelope


def _responses(access: Access, errors: dict[int, str], *, has_body: bool = False,
               has_path_parameters: bool = False) -> dict[int, ResponseSpec]:
    # 400 on every route: parameters, headers (X-Sub-Org-Id) and a NUL in the path or query are refused
    statuses: dict[int, str] = {400: _DESCRIPTIONS[400]}
    if not access.public:
        described = _WIDGET_DESCRIPTIONS if access.auth is AuthMode.WIDGET else _DESCRIPTIONS
        for status in (401, 403, 429):
            statuses[status] = described[status]
    if has_path_parameters:
        statuses[404] = _DESCRIPTIONS[404]  # an unknown id (a path parameter of the wrong type is 400)
    if has_body:
        for status in (413, 415):
            statuses[status] = _DESCRIPTIONS[status]
    if access.idempotent:
        if access.large_body:
            statuses[400] += f"; {_IDEMPOTENCY_UNSUPPORTED}"
        statuses[409] = "Conflict; idempotency_key_in_use while a request with the same key is in flight"
        if access.secret:
            statuses[409] += ("; idempotency_replay_unavailable when the stored response was sealed under a "
                              "secret key the service no longer holds")
        statuses[422] = "idempotency_key_mismatch: the key was used with a different request"
    for status, text in errors.items():
        statuses[status] = f"{statuses[status]}; {text}" if status in statuses and text else (
            statuses.get(status) or text or _DESCRIPTIONS.get(status, "Error"))
    return {
        status: ResponseSpec(
            data_container=_envelope_of(status, access, errors),
            description=text,
            generate_examples=False,
        )
        for status, text in sorted(statuses.items())
    }


def endpoint(
    method: str,
    path: str,
    *,
    operation_id: str,
    summary: str,
    tags: list[str],
    scopes: tuple[str, ...] = (),
    auth: AuthMode | str = AuthMode.KEY,
    idempotent: bool | None = None,
    secret: bool = False,
    location: str | None = None,
    errors: dict[int, str] | None = None,
    status_code: int | None = None,
    responses: dict[int, ResponseSpec] | None = None,
    form: FileForm | None = None,
    sudo: bool = False,
    **kwargs: Any,
) -> Callable[[Callable[..., Any]], Any]:
    """``idempotent``: whether the route honours Idempotency-Key (default: every authenticated POST does);
    ``secret``: its success response carries a secret (see ``Access.secret``); ``form``: the multipart form
    of files the handler reads itself (``form.files(await request.form())``), its documented request body."""
    mode = auth_mode(auth, operation_id)
    if idempotent is None:
        idempotent = method == "POST" and mode is not AuthMode.PUBLIC
    audited = method in AUDITED_METHODS and mode in (AuthMode.KEY, AuthMode.KEY_OR_SESSION, AuthMode.SESSION)
    access = Access(scopes=scopes, auth=mode, idempotent=idempotent, secret=secret,
                    large_body=(kwargs.get("request_max_body_size") or 0) > MAX_BODY_BYTES,
                    location=location, sudo=sudo, action=action_of(operation_id) if audited else None)
    if access.auth is AuthMode.KEY and not access.scopes:
        raise ValueError(f"{operation_id}: an authenticated route must declare its scopes")
    security: list[dict[str, list[str]]] = [] if access.public else [{"BearerAuth": []}]
    if access.auth is AuthMode.WIDGET:
        security = [{WIDGET_SCHEME: []}]  # a widget token only: a Bearer key never opens these routes
    if access.auth is AuthMode.KEY_OR_SESSION:
        security.append({SESSION_SCHEME: []})  # either one: OpenAPI's alternatives
    if access.auth is AuthMode.SESSION:
        security = [{SESSION_SCHEME: []}]
    if access.auth in (AuthMode.KEY_OR_SESSION, AuthMode.SESSION) and method not in SAFE_METHODS:
        errors = {**(errors or {}), 403: CSRF_FAILED}
        if sudo:
            errors[403] = f"{CSRF_FAILED}; {REAUTHENTICATION_REQUIRED}"
    decorator = _DECORATORS[method]
    extra: dict[str, Any] = {}
    if status_code is not None:
        extra["status_code"] = status_code

    def register(fn: Callable[..., Any]) -> Any:
        has_body = form is not None or BODY_PARAMETER in inspect.signature(fn).parameters
        documented = _responses(access, errors or {}, has_body=has_body, has_path_parameters="{" in path)
        return decorator(
            path,
            operation_id=operation_id,
            summary=summary,
            tags=tags,
            opt={ACCESS: access, FORM: form},
            responses={**documented, **(responses or {})},
            security=security,
            **extra,
            **kwargs,
        )(fn)

    return register


def access_of(opt: dict[str, Any]) -> Access | None:
    return opt.get(ACCESS)


def form_of(opt: dict[str, Any]) -> FileForm | None:
    return opt.get(FORM)


def stream_endpoint(path: str, *, name: str, summary: str) -> Callable[[Callable[..., Any]], Any]:
    """A websocket route (the media streams), declared here like every HTTP route is with ``endpoint``. OpenAPI
    describes no websockets: these routes are left out of the document and documented in docs/ (docs/telephony.md,
    Media streams). Their credential is in the path (a single-use token the handler redeems before it reads a
    frame), so the request pipeline's authentication does not run: the access is ``public``."""

    def register(fn: Callable[..., Any]) -> Any:
        return websocket(path, name=name, opt={ACCESS: Access(auth=AuthMode.PUBLIC), STREAM: summary})(fn)

    return register


def is_stream(handler: Any) -> bool:
    """A route declared with ``stream_endpoint``."""
    return STREAM in (getattr(handler, "opt", None) or {})

"""Authenticators: one per ``AuthMode``, each reading its credential from the request and answering with a
``Principal`` or refusing (401 in the auth envelope).

The API-key, dashboard-session and widget-token authenticators are all in use. A session on an unsafe method
must also carry its CSRF token (``X-CSRF-Token``), else ``CsrfRejected`` (403 ``csrf_failed``). A widget token is
sent as ``Authorization: Widget <token>`` and opens only widget routes; a Bearer credential never does (and a
widget token sent as Bearer is no API key: 401 everywhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from dishka import AsyncContainer
from litestar.enums import ScopeType
from litestar.types import Scope

from application.accounts import Authenticate, AuthenticateCommand
from application.ports.platform import Clock
from application.principals import AuthenticationFailed, Principal
from application.sessions import ActiveSession, ResumeSession, ResumeSessionCommand, SessionInvalid
from application.widget import AuthenticateWidgetToken, AuthenticateWidgetTokenCommand
from domain.sessions import same_token
from entrypoints.http.routing import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, AuthMode, access_of

BEARER_CHALLENGE = b'Bearer realm="parley"'
INVALID_TOKEN_CHALLENGE = b'Bearer realm="parley", error="invalid_token"'
WIDGET_CHALLENGE = b'Widget realm="parley-widget"'
INVALID_WIDGET_CHALLENGE = b'Widget realm="parley-widget", error="invalid_token"'


class Refused(Exception):
    """No principal: a 401 with ``code`` and ``message``. ``presented``: a credential was sent and rejected
    (it counts against the client address's failed-authentication budget)."""

    def __init__(self, code: str, message: str, *, challenge: bytes | None = None, presented: bool = False) -> None:
        super().__init__(message)
        self.code, self.message, self.challenge, self.presented = code, message, challenge, presented


class CsrfRejected(Exception):
    """A session on an unsafe method without its CSRF token: 403 ``csrf_failed``."""

    code = "csrf_failed"

    def __init__(self) -> None:
        super().__init__(f"{CSRF_HEADER} is missing or does not match the session's csrf_token")
        self.message = str(self)


class ReauthenticationRequired(CsrfRejected):
    """A session whose user last gave the password (or a code) more than ``domain.sessions.SUDO`` ago, on a route
    that asks for a freshly proven one (``Access.sudo``): answered as ``CsrfRejected`` is (403, the router
    envelope), with its own code."""

    code = "reauthentication_required"

    def __init__(self) -> None:
        Exception.__init__(self, "This needs your password again: POST /auth/verify, then retry (a session proves "
                                 "its user for 5 minutes)")
        self.message = str(self)


class Authenticator(Protocol):
    async def authenticate(self, scope: Scope) -> Principal:
        """The request's principal; raises ``Refused``."""
        ...


def _authorization(scope: Scope) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)


def credential(scope: Scope, scheme: str) -> str | None:
    """The credential of ``Authorization: <scheme> <credential>`` (None when missing or another scheme)."""
    value = _authorization(scope)
    size = len(scheme) + 1
    if not value or value[:size].lower() != f"{scheme.lower()} " or not value[size:].strip():
        return None
    return value[size:].strip()


def bearer_token(scope: Scope) -> str | None:
    """The credential of ``Authorization: Bearer <credential>`` (None when missing or another scheme)."""
    return credential(scope, "Bearer")


class ApiKeyAuthenticator:
    def __init__(self, authenticate: Authenticate) -> None:
        self._authenticate = authenticate

    async def authenticate(self, scope: Scope) -> Principal:
        token = bearer_token(scope)
        if token is None:
            raise Refused("MISSING_AUTH", "Authorization: Bearer <API key> is required", challenge=BEARER_CHALLENGE)
        try:
            return await self._authenticate.execute(AuthenticateCommand(token))
        except AuthenticationFailed as exc:
            raise Refused(exc.code, str(exc), challenge=INVALID_TOKEN_CHALLENGE, presented=True) from None


def cookie(scope: Scope, name: str) -> str | None:
    """The value of cookie ``name`` (the first one sent), None when absent."""
    for key, value in scope["headers"]:
        if key != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            found, sep, text = part.strip().partition("=")
            if sep and found == name:
                return text.strip().strip('"')
    return None


def header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


class SessionAuthenticator:
    """Dashboard sessions: the ``parley_session`` cookie, resumed from the database (``ResumeSession``). An
    unsafe method also needs the session's CSRF token in ``X-CSRF-Token``."""

    def __init__(self, resume: ResumeSession, clock: Clock) -> None:
        self._resume, self._clock = resume, clock

    async def active(self, scope: Scope) -> ActiveSession:
        """The live session the request's cookie names; raises ``Refused``."""
        session_id = cookie(scope, SESSION_COOKIE)
        if not session_id:
            raise Refused("MISSING_AUTH", "A dashboard session is required")
        try:
            return await self._resume.execute(ResumeSessionCommand(session_id))
        except SessionInvalid as exc:
            raise Refused(exc.code, str(exc), presented=True) from None

    async def authenticate(self, scope: Scope) -> Principal:
        active = await self.active(scope)
        unsafe = scope["type"] != ScopeType.HTTP or scope["method"] not in SAFE_METHODS  # fail closed
        if unsafe and not same_token(active.session.csrf_token, header(scope, CSRF_HEADER.lower().encode())):
            raise CsrfRejected
        if active.mfa_missing:
            raise Refused("MFA_ENROLMENT_REQUIRED", "Your organization requires two-factor sign-in: turn it on in "
                          "the dashboard (your account page) first", presented=False)
        handler = scope.get("route_handler")
        access = access_of(handler.opt) if handler is not None else None
        if access is not None and access.sudo and not active.session.recently_verified(self._clock.now()):
            raise ReauthenticationRequired
        return Principal.session(active.session.user_id, active.organization, active.role)


class WidgetAuthenticator:
    """Widget tokens (``Authorization: Widget <token>``): a Bearer credential, an API key included, is refused."""

    def __init__(self, authenticate: AuthenticateWidgetToken) -> None:
        self._authenticate = authenticate

    async def authenticate(self, scope: Scope) -> Principal:
        token = credential(scope, "Widget")
        if token is None:
            if _authorization(scope) is not None:
                raise Refused("INVALID_WIDGET_TOKEN", "Widget routes take Authorization: Widget <token>, "
                              "never a Bearer key", challenge=INVALID_WIDGET_CHALLENGE, presented=True)
            raise Refused("MISSING_AUTH", "Authorization: Widget <token> is required", challenge=WIDGET_CHALLENGE)
        try:
            return await self._authenticate.execute(AuthenticateWidgetTokenCommand(token))
        except AuthenticationFailed as exc:
            raise Refused(exc.code, str(exc), challenge=INVALID_WIDGET_CHALLENGE, presented=True) from None


class PublicAuthenticator:
    async def authenticate(self, scope: Scope) -> Principal:
        return Principal.public()


@dataclass(frozen=True, slots=True)
class KeyOrSession:
    """A Bearer API key when the request carries one, else a dashboard session."""

    key: Authenticator
    session: Authenticator

    async def authenticate(self, scope: Scope) -> Principal:
        if bearer_token(scope) is not None:
            return await self.key.authenticate(scope)
        try:
            return await self.session.authenticate(scope)
        except Refused as exc:
            if exc.code != "MISSING_AUTH":
                raise
            raise Refused("MISSING_AUTH", "Authorization: Bearer <API key> or a dashboard session is required",
                          challenge=BEARER_CHALLENGE) from None


_AUTHENTICATOR_TYPES: dict[AuthMode, type[Authenticator]] = {
    AuthMode.KEY: ApiKeyAuthenticator,
    AuthMode.KEY_OR_SESSION: KeyOrSession,
    AuthMode.SESSION: SessionAuthenticator,
    AuthMode.WIDGET: WidgetAuthenticator,
    AuthMode.PUBLIC: PublicAuthenticator,
}
if set(AuthMode) - set(_AUTHENTICATOR_TYPES):  # a mode without an authenticator stops the import
    raise ValueError(f"no authenticator for {sorted(set(AuthMode) - set(_AUTHENTICATOR_TYPES))}")


class Authenticators:
    """The authenticator of every ``AuthMode``, built from the request's container when a route asks for its mode:
    a request builds the one it uses (with its use case and ports), not all five."""

    def __init__(self, container: AsyncContainer) -> None:
        self._container = container

    async def for_mode(self, mode: AuthMode) -> Authenticator:
        if mode is AuthMode.KEY_OR_SESSION:
            return KeyOrSession(await self._container.get(ApiKeyAuthenticator),
                                await self._container.get(SessionAuthenticator))
        return await self._container.get(_AUTHENTICATOR_TYPES[mode])

"""Authenticators: one per ``AuthMode``, each reading its credential from the request and answering with a
``Principal`` or refusing (401 in the auth envelope).

The API-key authenticator is the one in use; the dashboard-session and widget-token authenticators refuse
every request until those credentials exist, so a route declared for them fails closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from litestar.types import Scope

from application.accounts import Authenticate, AuthenticateCommand
from application.principals import AuthenticationFailed, Principal
from entrypoints.http.routing import AuthMode

BEARER_CHALLENGE = b'Bearer realm="parley"'
INVALID_TOKEN_CHALLENGE = b'Bearer realm="parley", error="invalid_token"'


class Refused(Exception):
    """No principal: a 401 with ``code`` and ``message``. ``presented``: a credential was sent and rejected
    (it counts against the client address's failed-authentication budget)."""

    def __init__(self, code: str, message: str, *, challenge: bytes | None = None, presented: bool = False) -> None:
        super().__init__(message)
        self.code, self.message, self.challenge, self.presented = code, message, challenge, presented


class Authenticator(Protocol):
    async def authenticate(self, scope: Scope) -> Principal:
        """The request's principal; raises ``Refused``."""
        ...


def bearer_token(scope: Scope) -> str | None:
    """The credential of ``Authorization: Bearer <credential>`` (None when missing or another scheme)."""
    value = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
    if not value or value[:7].lower() != "bearer " or not value[7:].strip():
        return None
    return value[7:].strip()


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


class SessionAuthenticator:
    """Dashboard sessions: none can be opened yet, so every request is refused."""

    async def authenticate(self, scope: Scope) -> Principal:
        raise Refused("MISSING_AUTH", "A dashboard session is required")


class WidgetAuthenticator:
    """Widget tokens: none can be minted yet, so every token is refused."""

    async def authenticate(self, scope: Scope) -> Principal:
        if bearer_token(scope) is None:
            raise Refused("MISSING_AUTH", "Authorization: Bearer <widget token> is required",
                          challenge=BEARER_CHALLENGE)
        raise Refused("INVALID_WIDGET_TOKEN", "Widget token is not valid", challenge=INVALID_TOKEN_CHALLENGE,
                      presented=True)


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


class Authenticators:
    """The authenticator of every ``AuthMode`` (a mode without one cannot be built)."""

    def __init__(self, key: ApiKeyAuthenticator, session: SessionAuthenticator, widget: WidgetAuthenticator,
                 public: PublicAuthenticator) -> None:
        self._by_mode: dict[AuthMode, Authenticator] = {
            AuthMode.KEY: key,
            AuthMode.KEY_OR_SESSION: KeyOrSession(key, session),
            AuthMode.WIDGET: widget,
            AuthMode.PUBLIC: public,
        }
        missing = set(AuthMode) - set(self._by_mode)
        if missing:
            raise ValueError(f"no authenticator for {sorted(missing)}")

    def for_mode(self, mode: AuthMode) -> Authenticator:
        return self._by_mode[mode]

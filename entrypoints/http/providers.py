"""Request-derived values for the container: the transaction mode, the authenticators, the pipeline's
collaborators and the acting principal."""

from __future__ import annotations

from typing import Any

from dishka import AsyncContainer, Provider, Scope, provide, provide_all
from litestar import Request

from application.context import Actor, ApiBaseUrl
from application.ports.platform import Units
from domain.widget import WidgetGrant
from entrypoints.http.asgi import PRIMARY_PREFIX, request_api_base
from entrypoints.http.authentication import (
    ApiKeyAuthenticator,
    Authenticators,
    PublicAuthenticator,
    SessionAuthenticator,
    WidgetAuthenticator,
)
from entrypoints.http.pipeline import RequestGate
from entrypoints.runtime import TransactionMode
from entrypoints.settings import Settings
from entrypoints.units import ScopedUnits


def stand_in_request() -> Request:  # type: ignore[type-arg]  # dishka keys the request by the bare class
    """What a unit of work of the HTTP container opened outside any request carries as its request (a media
    session's units): a write (POST) with no headers; links it makes use PARLEY_PUBLIC_BASE_URL, or 127.0.0.1."""
    scope: Any = {"type": "http", "method": "POST", "path": "/", "raw_path": b"/", "headers": [], "query_string": b"",
                  "state": {}, "scheme": "http", "path_params": {}}
    return Request(scope)


class HttpProvider(Provider):
    @provide(scope=Scope.APP)
    def units(self, container: AsyncContainer) -> Units:
        """Units of work outside a request (a media session lasts the call): each a scope with a stand-in request."""
        return ScopedUnits(container, context={Request: stand_in_request()})

    gate = provide_all(ApiKeyAuthenticator, SessionAuthenticator, WidgetAuthenticator, PublicAuthenticator,
                       Authenticators, RequestGate, scope=Scope.REQUEST)

    @provide(scope=Scope.REQUEST)
    def mode(self, request: Request) -> TransactionMode:  # type: ignore[type-arg]  # dishka keys the request by the bare class
        return TransactionMode(write=request.method not in ("GET", "HEAD", "OPTIONS"))

    @provide(scope=Scope.REQUEST)
    def api_base(self, request: Request, settings: Settings) -> ApiBaseUrl:  # type: ignore[type-arg]  # dishka keys the request by the bare class
        """PARLEY_PUBLIC_BASE_URL when set, else the base URL this request came in on."""
        if settings.public_base_url:
            return ApiBaseUrl(settings.public_base_url.rstrip("/") + PRIMARY_PREFIX)
        return ApiBaseUrl(request_api_base(request.scope))

    @provide(scope=Scope.REQUEST)
    def actor(self, request: Request) -> Actor:  # type: ignore[type-arg]  # dishka keys the request by the bare class
        actor = request.scope.get("state", {}).get("actor")
        if actor is None:
            raise LookupError("no authenticated actor on this request")
        return actor

    @provide(scope=Scope.REQUEST)
    def widget_grant(self, request: Request) -> WidgetGrant:  # type: ignore[type-arg]  # dishka keys the request by the bare class
        """What the request's widget token grants (widget routes only)."""
        grant = request.scope.get("state", {}).get("widget_grant")
        if grant is None:
            raise LookupError("no widget token on this request")
        return grant

"""The operations the app really serves, read from Litestar's route table (not a hand-written list),
so routes added later by other features are covered by the tests that walk it."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.routes import HTTPRoute

from entrypoints.http.asgi import API_PREFIX, PRIMARY_PREFIX
from entrypoints.http.routing import BODY_PARAMETER, Access, access_of, form_of

_PARAMETER = re.compile(r"\{(\w+)(?::\w+)?\}")
# A value of the right type that no test data uses, so a lookup answers 404, never 401/403.
_UNKNOWN_BY_TYPE: dict[Any, str] = {
    int: "999999",
    float: "999999.5",
    uuid.UUID: "00000000-0000-4000-8000-0000000f4240",
    date: "2099-01-01",
    datetime: "2099-01-01T00:00:00Z",
}


@dataclass(frozen=True)
class ServedOperation:
    method: str
    route: HTTPRoute
    handler: HTTPRouteHandler

    @property
    def access(self) -> Access | None:
        return access_of(self.handler.opt)

    @property
    def documented_path(self) -> str:
        """The OpenAPI path: relative to the servers' prefix, parameters without their types."""
        return _PARAMETER.sub(r"{\1}", self.route.path.removeprefix(API_PREFIX)) or "/"

    @property
    def has_body(self) -> bool:
        """A JSON body (``data``), or a multipart form the handler reads itself (``endpoint(..., form=...)``)."""
        return BODY_PARAMETER in self.handler.parsed_fn_signature.parameters or form_of(self.handler.opt) is not None

    @property
    def label(self) -> str:
        return f"{self.method} {self.documented_path}"

    def url(self, prefix: str = PRIMARY_PREFIX) -> str:
        """A concrete URL with every path parameter set to an unknown value of its type."""
        path = self.route.path.removeprefix(API_PREFIX)
        for name, definition in self.route.path_parameters.items():
            value = _UNKNOWN_BY_TYPE.get(definition.type, "unknown")
            path = path.replace("{" + definition.full + "}", value).replace("{" + name + "}", value)
        return prefix + path


def served_operations(app: Litestar) -> list[ServedOperation]:
    """Every method of every HTTP route of the API, except Litestar's automatic OPTIONS. The dashboard's HTML
    pages (``dashboard_routes``) are another surface, outside the OpenAPI document."""
    found = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or route.path in dashboard_routes(app):
            continue
        for handler in route.route_handlers:
            for method in sorted(handler.http_methods):
                if method == "OPTIONS" and access_of(handler.opt) is None:
                    continue
                found.append(ServedOperation(method, route, handler))
    return sorted(found, key=lambda op: (op.documented_path, op.method))


DASHBOARD_PREFIX = "/dashboard"


def dashboard_routes(app: Litestar) -> set[str]:
    """The paths of the dashboard's HTML pages and its stylesheet."""
    return {route.path for route in app.routes
            if route.path == DASHBOARD_PREFIX or route.path.startswith(DASHBOARD_PREFIX + "/")}

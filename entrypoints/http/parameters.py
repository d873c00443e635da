"""Path and query parameters that do not parse are invalid parameters: 400 bad_request naming the parameter,
never 404 or 422 (http-contract.md).

- A path parameter of the wrong type (``/agents/abc``): Litestar's router answers such a path 404, as if no
  route had it; ``path_parameter_errors`` finds the route and names the parameter for the routing error handler.
- Integers are plain ASCII digits, in the path and in the query: Python's ``int`` also reads ``+1``, `` 1`` and
  ``1_0``, and msgspec's lax conversion of a query value reads ``1e2`` as 100 and ``10.0`` as 10.
  ``refuse_loose_integers`` (the API router's ``before_request``) refuses them before the handler runs.
"""

from __future__ import annotations

import re
import types
import uuid
from typing import Annotated, Any, Union, get_args, get_origin

from litestar import Litestar, Request
from litestar.handlers import HTTPRouteHandler
from litestar.params import ParameterKwarg
from litestar.routes import HTTPRoute

from domain.errors import ValidationFailed

_INTEGER = re.compile(r"-?[0-9]+")
_SEGMENT = re.compile(r"^\{(?P<name>\w+):(?P<type>\w+)\}$")
NOT_AN_INTEGER = "must be an integer written in ASCII digits (such as 25)"
_EXPECTED = {"int": NOT_AN_INTEGER, "uuid": "must be a UUID (such as 123e4567-e89b-42d3-a456-426614174000)",
             "float": "must be a number", "decimal": "must be a number", "date": "must be a date (YYYY-MM-DD)"}


def _parses(kind: str, value: str) -> bool:
    if kind == "int":
        return _INTEGER.fullmatch(value) is not None
    if kind == "uuid":
        try:
            uuid.UUID(value)
        except ValueError:
            return False
        return True
    return True


def path_parameter_errors(app: Litestar, path: str) -> dict[str, str]:
    """For a path no route took because a parameter did not parse: that parameter and what it must be (empty
    when no route has the path's shape)."""
    segments = path.split("/")
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        template = route.path.split("/")
        if len(template) != len(segments):
            continue
        errors: dict[str, str] = {}
        for pattern, value in zip(template, segments, strict=True):
            match = _SEGMENT.match(pattern)
            if match is None:
                if pattern != value:
                    break
            elif not _parses(match["type"], value):
                errors.setdefault(match["name"], _EXPECTED.get(match["type"], "is not valid"))
        else:
            if errors:
                return errors
    return {}


def _is_integer(annotation: Any) -> bool:
    """``int``, ``int | None`` or either inside ``Annotated``."""
    if get_origin(annotation) is Annotated:
        return _is_integer(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [arg for arg in get_args(annotation) if arg is not type(None)]
        return len(kinds) == 1 and _is_integer(kinds[0])
    return annotation is int


_INTEGERS: dict[tuple[int, str], tuple[tuple[str, ...], tuple[tuple[int, str], ...]]] = {}
_PLACEHOLDER = re.compile(r"^\{(?P<name>\w+)\}$")


def _integer_parameters(handler: HTTPRouteHandler,
                        template: str) -> tuple[tuple[str, ...], tuple[tuple[int, str], ...]]:
    """The handler's integer query parameters, and the positions and names of the integer segments of its path
    (``template``: the route's path as routing puts it in the scope, ``/api/v2/agents/{id}``)."""
    key = (id(handler), template)
    found = _INTEGERS.get(key)
    if found is None:
        integers: dict[str, str] = {}  # parameter -> its name in the query
        for name, field in handler.parsed_fn_signature.parameters.items():
            kwarg = field.kwarg_definition
            if kwarg is not None and not isinstance(kwarg, ParameterKwarg):
                continue  # a body, a dependency
            if kwarg is not None and (kwarg.header is not None or kwarg.cookie is not None):
                continue
            if _is_integer(field.annotation):
                integers[name] = kwarg.query if kwarg is not None and kwarg.query else name
        segments = [_PLACEHOLDER.match(segment) for segment in template.split("/")]
        path = tuple((index, match["name"]) for index, match in enumerate(segments)
                     if match is not None and match["name"] in integers)
        in_path = {name for _, name in path}
        found = _INTEGERS[key] = (tuple(query for name, query in integers.items() if name not in in_path), path)
    return found


async def refuse_loose_integers(request: Request[Any, Any, Any]) -> None:
    """400 naming the parameter for an integer path or query parameter that is not plain ASCII digits."""
    template = request.scope.get("path_template") or ""
    query, path = _integer_parameters(request.route_handler, template)
    if path:
        segments = request.scope["path"].split("/")
        for index, name in path:
            if index < len(segments) and not _INTEGER.fullmatch(segments[index]):
                raise ValidationFailed.field(name, NOT_AN_INTEGER)
    for name in query:
        for value in request.query_params.getall(name, ()):
            if not _INTEGER.fullmatch(value):
                raise ValidationFailed.field(name, NOT_AN_INTEGER)

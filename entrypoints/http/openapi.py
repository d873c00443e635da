"""The served OpenAPI document: Litestar's schema with paths relative to the two API prefixes, completed
with what the request pipeline adds around every handler.

- Request bodies whose struct rejects unknown fields (400) say ``additionalProperties: false``.
- Every authenticated operation takes the optional ``X-Sub-Org-Id`` header; a 201 that creates an addressable
  resource documents ``Location``.
- Every response documents ``X-Request-Id`` and ``X-Content-Type-Options``; every response of an
  authenticated operation except 401 documents the rate-limit headers (required but on 400 and 404,
  which can also come before authentication), and the optional key-expiry ones; 429 documents
  ``Retry-After``; operations that honour ``Idempotency-Key`` document ``Idempotency-Replayed`` on what a
  replay can return; operations whose response carries a secret document ``Cache-Control``. Each header is
  defined once in ``components/headers`` (``<name>`` optional, ``<name>.required`` required) and referenced.
- A route that reads a multipart form itself (``endpoint(..., form=...)``) documents it as its request body; a
  body the route may go without (``X | None``) is not required.
- What generated clients trip over is put right: a ``oneOf`` of one member is that member; a query parameter
  is never null (it is sent or not); a bound of zero that Litestar leaves out of an optional field or
  parameter is restored from the struct's own JSON schema (msgspec) or the parameter's declaration; public
  operations say ``security: []``; a binary download (audio) is ``format: binary``.

Built on first request and kept for the life of the process (every app of a process serves the
same routes), so creating an app stays cheap.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.params import ParameterKwarg

from domain.idempotency import MAX_BODY_BYTES
from domain.parsing import MAX_ID
from entrypoints.http import asgi
from entrypoints.http.multipart import FileForm
from entrypoints.http.routing import Access, access_of, form_of

_cache: dict[tuple[str, ...], bytes] = {}

HEADERS: dict[str, dict[str, Any]] = {
    "X-Request-Id": {"description": "The request's id (the client's X-Request-Id if it sent a usable one); "
                                    "it is in the server's logs", "schema": {"type": "string"}},
    "X-RateLimit-Limit": {"description": "Requests allowed in the current window", "schema": {"type": "integer"}},
    "X-RateLimit-Remaining": {"description": "Requests left in the current window",
                              "schema": {"type": "integer"}},
    "X-RateLimit-Reset": {"description": "When the current window resets (Unix epoch seconds)",
                          "schema": {"type": "integer"}},
    "Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}},
    "X-API-Key-Expires-At": {"description": "Sent when the key expires within seven days: its expiry (RFC 3339)",
                             "schema": {"type": "string", "format": "date-time"}},
    "X-API-Key-Expires-In-Days": {"description": "Sent with X-API-Key-Expires-At: whole days left",
                                  "schema": {"type": "integer"}},
    "Idempotency-Replayed": {"description": "true when this is the stored response of an earlier request "
                                            "with the same Idempotency-Key", "schema": {"type": "string",
                                                                                        "enum": ["true"]}},
    "X-Content-Type-Options": {"description": "Always nosniff: a client must not guess another media type",
                               "schema": {"type": "string", "enum": ["nosniff"]}},
    "Cache-Control": {"description": "no-store: the response carries a secret (a key, a signing secret, a "
                                     "token), which no cache may keep", "schema": {"type": "string",
                                                                                  "enum": ["no-store"]}},
    "Location": {"description": "The created resource's URL (201) or where a redirect leads (3xx), under the prefix "
                                "the request used (/v2 or /api/v2)",
                 "schema": {"type": "string", "format": "uri-reference"}},
}
SUB_ORG_ID: dict[str, Any] = {
    "name": "X-Sub-Org-Id", "in": "header", "required": False,
    "description": "Act on one of the calling partner organization's sub-organizations (its id). Sent at most "
                   "once; anything but a whole number from 1 to 9007199254740992 in ASCII digits is 400, a "
                   "sub-organization the key may not act for is 403 sub_org_forbidden",
    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
}
IDEMPOTENCY_KEY: dict[str, Any] = {
    "name": "Idempotency-Key", "in": "header", "required": False,
    "description": "Makes the request safe to retry: a repeat with the same key and the same request, from the "
                   "same API key (or a key rotated from it), within about 24 hours returns the stored response "
                   "(Idempotency-Replayed: true) without acting again; with another request it is 422 "
                   "idempotency_key_mismatch; while the first is still running it is 409 idempotency_key_in_use",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"},
}
_RATE_LIMIT = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
_KEY_EXPIRY = ("X-API-Key-Expires-At", "X-API-Key-Expires-In-Days")
# statuses also given before a request reaches authentication (a NUL in the URL; a path parameter of the
# wrong type matches no route): there the rate-limit headers may be missing
_BEFORE_AUTHENTICATION = {"400", "404"}
# answered before the handler runs, so never stored under an Idempotency-Key
_NOT_REPLAYED = {"401", "403", "429", "500", "503"}


def document(app: Litestar) -> bytes:
    key = tuple(sorted(route.path for route in app.routes))
    cached = _cache.get(key)
    if cached is None:
        cached = _cache[key] = _build(app)
    return cached


def _build(app: Litestar) -> bytes:
    schema = app.openapi_schema.to_schema()
    paths = {}
    for path, item in schema.get("paths", {}).items():
        if path.startswith(asgi.API_PREFIX):
            paths[path[len(asgi.API_PREFIX):] or "/"] = item
    schema["paths"] = dict(sorted(paths.items()))
    schema["servers"] = [
        {"url": asgi.PRIMARY_PREFIX, "description": "Primary host ({base_url})"},
        {"url": asgi.API_PREFIX, "description": "Dashboard host ({dashboard_base_url})"},
    ]
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    _restore_struct_bounds(schemas)
    _close_strict_objects(schemas)
    handlers = _handlers(app)
    used_headers: set[str] = set()
    for item in schema["paths"].values():
        for operation in item.values():
            if isinstance(operation, dict) and "responses" in operation:
                handler = handlers.get(operation.get("operationId") or "")
                access = (access_of(handler.opt) if handler is not None else None) or Access()
                if handler is not None:
                    _document_parameters(operation, handler)
                    _document_body(operation, form_of(handler.opt), schemas)
                if access.public:
                    operation["security"] = []
                elif handler is not None:
                    operation.setdefault("parameters", []).append(SUB_ORG_ID)
                if access.idempotent:
                    operation.setdefault("parameters", []).append(_idempotency_key(access))
                _document_headers(operation, access, used_headers)
                if access.location and "201" in operation["responses"]:
                    operation["responses"]["201"].setdefault("headers", {})["Location"] = _ref(
                        "Location", True, used_headers)
                _describe_binary(operation)
    components["headers"] = {key: _header(key) for key in sorted(used_headers)}
    schema = _inline_single_one_of(schema)
    return msgspec.json.encode(schema)


def _handlers(app: Litestar) -> dict[str, HTTPRouteHandler]:
    found = {}
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            if access_of(handler.opt) is not None and isinstance(handler.operation_id, str):
                found[handler.operation_id] = handler
    return found


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without null: a query parameter is sent or not, never null."""
    schema = dict(schema)
    if isinstance(schema.get("oneOf"), list):
        members = [member for member in schema["oneOf"] if member != {"type": "null"}]
        schema["oneOf"] = members
    if isinstance(schema.get("type"), list):
        kinds = [kind for kind in schema["type"] if kind != "null"]
        schema["type"] = kinds[0] if len(kinds) == 1 else kinds
    if isinstance(schema.get("enum"), list):
        schema["enum"] = [value for value in schema["enum"] if value is not None]
    return schema


_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _document_parameters(operation: dict[str, Any], handler: HTTPRouteHandler) -> None:
    """Query parameters without null, and the bounds Litestar drops when they are zero."""
    declared = {}
    for name, field in handler.parsed_fn_signature.parameters.items():
        kwarg = field.kwarg_definition
        if isinstance(kwarg, ParameterKwarg):
            declared[kwarg.query or kwarg.header or name] = kwarg
    for parameter in operation.get("parameters", []):
        if parameter.get("in") == "query":
            parameter["schema"] = _not_null(parameter["schema"])
        kwarg = declared.get(parameter["name"])
        for attribute, keyword in _BOUNDS.items():
            value = getattr(kwarg, attribute, None)
            if value is not None and keyword not in parameter["schema"]:
                parameter["schema"][keyword] = value


def _document_body(operation: dict[str, Any], form: FileForm | None, schemas: dict[str, Any]) -> None:
    if form is not None:
        schemas[form.title] = form.schema()
        operation["requestBody"] = {"required": True, "content": {"multipart/form-data": {
            "schema": {"$ref": f"#/components/schemas/{form.title}"}}}}
        return
    for media in operation.get("requestBody", {}).get("content", {}).values():
        members = media.get("schema", {}).get("oneOf")
        if isinstance(members, list) and {"type": "null"} in members:  # ``X | None = None``: may be left out
            operation["requestBody"]["required"] = False
            media["schema"] = _not_null(media["schema"])


def _describe_binary(operation: dict[str, Any]) -> None:
    for response in operation["responses"].values():
        for media_type, media in response.get("content", {}).items():
            if media_type.startswith("audio/"):
                media["schema"] = {"type": "string", "format": "binary"}


def _inline_single_one_of(node: Any) -> Any:
    """Every ``{"oneOf": [X], ...}`` as X with the other keywords beside it."""
    if isinstance(node, list):
        return [_inline_single_one_of(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _inline_single_one_of(value) for key, value in node.items()}
    members = node.get("oneOf")
    if isinstance(members, list) and len(members) == 1 and isinstance(members[0], dict):
        rest = {key: value for key, value in node.items() if key != "oneOf"}
        node = {**members[0], **rest}
    return node


def _struct_classes() -> dict[str, type[msgspec.Struct]]:
    """The API's structs by name (a name two structs share is left out)."""
    found: dict[str, list[type[msgspec.Struct]]] = {}
    pending: list[type[msgspec.Struct]] = [msgspec.Struct]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("entrypoints.") and not getattr(cls, "__parameters__", ()):
            found.setdefault(cls.__name__, []).append(cls)
    return {name: classes[0] for name, classes in found.items() if len(classes) == 1}


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """The numeric bounds of a property in msgspec's JSON schema (looking into anyOf)."""
    found = {key: schema[key] for key in _BOUNDS.values() if key in schema}
    for member in schema.get("anyOf", []):
        found = {**_bounds(member), **found}
    return found


def _restore_struct_bounds(schemas: dict[str, Any]) -> None:
    """Litestar leaves a bound of zero out of an optional field (``Meta(ge=0)`` on ``int | None``): put back
    every bound msgspec's own schema of the struct has."""
    classes = _struct_classes()
    for component in schemas.values():
        cls = classes.get(component.get("title", ""))
        if cls is None or "properties" not in component:
            continue
        _, definitions = msgspec.json.schema_components([cls])
        properties = definitions.get(cls.__name__, {}).get("properties", {})
        for name, prop in component["properties"].items():
            for key, value in _bounds(properties.get(name, {})).items():
                prop.setdefault(key, value)


def _idempotency_key(access: Access) -> dict[str, Any]:
    if not access.large_body:
        return IDEMPOTENCY_KEY
    return {**IDEMPOTENCY_KEY, "description": f"{IDEMPOTENCY_KEY['description']}. It covers request bodies up to "
                                              f"{MAX_BODY_BYTES // 2**20} MB: a larger one sent with this header "
                                              "gets 400 idempotency_unsupported"}


def _strict_struct_names() -> set[str]:
    """Names of the API's structs that reject unknown fields (a name shared with a lenient struct is left
    out: its component could be either)."""
    strict: dict[str, bool] = {}
    pending: list[type[msgspec.Struct]] = [msgspec.Struct]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("entrypoints."):
            forbids = bool(cls.__struct_config__.forbid_unknown_fields)
            strict[cls.__name__] = strict.get(cls.__name__, True) and forbids
    return {name for name, forbids in strict.items() if forbids}


def _close_strict_objects(schemas: dict[str, Any]) -> None:
    strict = _strict_struct_names()
    for name, component in schemas.items():
        if name in strict and component.get("type") == "object":
            component["additionalProperties"] = False


_REQUIRED = ".required"


def _header(key: str) -> dict[str, Any]:
    name = key.removesuffix(_REQUIRED)
    return {**HEADERS[name], "required": True} if key.endswith(_REQUIRED) else HEADERS[name]


def _ref(name: str, required: bool, used: set[str]) -> dict[str, Any]:
    # a Reference Object takes no siblings: a required header has a component of its own
    key = name + _REQUIRED if required else name
    used.add(key)
    return {"$ref": f"#/components/headers/{key}"}


def _document_headers(operation: dict[str, Any], access: Access, used: set[str]) -> None:
    responses: dict[str, dict[str, Any]] = operation["responses"]
    authenticated = not access.public and "401" in responses  # a public sign-in can answer 401 too
    for status, response in responses.items():
        headers = response.setdefault("headers", {})
        if status.startswith("3") and headers.pop("location", None) is not None:  # Litestar's, inline
            headers["Location"] = _ref("Location", True, used)
        headers["X-Request-Id"] = _ref("X-Request-Id", True, used)
        headers["X-Content-Type-Options"] = _ref("X-Content-Type-Options", True, used)
        if access.secret:  # set by the pipeline, so not on what is answered before routing
            headers["Cache-Control"] = _ref("Cache-Control", status not in _BEFORE_AUTHENTICATION, used)
        if authenticated and status != "401":
            for name in _RATE_LIMIT:
                headers[name] = _ref(name, status not in _BEFORE_AUTHENTICATION, used)
            for name in _KEY_EXPIRY:
                headers[name] = _ref(name, False, used)
        if status == "429":
            headers["Retry-After"] = _ref("Retry-After", True, used)
        if access.idempotent and status not in _NOT_REPLAYED:
            headers["Idempotency-Replayed"] = _ref("Idempotency-Replayed", False, used)

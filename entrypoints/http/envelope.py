"""Response envelopes and the mapping from errors to statuses and codes."""

from __future__ import annotations

import ast
import enum
import logging
import re
from typing import Any, Generic, Literal, TypeVar, get_args, get_origin

import msgspec
from litestar import Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    ValidationException,
)
from litestar.types import Message

from domain import errors as de
from entrypoints.http.messages import response_messages
from entrypoints.http.methods import allow_header
from entrypoints.http.parameters import path_parameter_errors
from entrypoints.http.patterns import UNKNOWN_PATTERN, words_for
from entrypoints.outages import RETRY_AFTER_SECONDS as OUTAGE_RETRY_AFTER
from entrypoints.outages import is_database_outage

T = TypeVar("T")
log = logging.getLogger("parley.http")


class ErrorBody(msgspec.Struct, omit_defaults=True):
    message: str
    code: str
    details: dict[str, Any] | None = None


class ErrorEnvelope(msgspec.Struct):
    """Router errors: validation, not found, conflict and the other domain errors."""

    error: ErrorBody
    success: bool = False


class AuthErrorBody(msgspec.Struct, omit_defaults=True):
    code: str
    message: str
    retry_after: int | None = None


class AuthErrorEnvelope(msgspec.Struct):
    """Authentication, scope and rate-limit errors."""

    error: AuthErrorBody
    success: bool = False


class Envelope(msgspec.Struct, Generic[T]):
    data: T
    success: bool = True


class ListMeta(msgspec.Struct):
    total: int
    limit: int
    offset: int


class ListEnvelope(msgspec.Struct, Generic[T]):
    data: list[T]
    meta: ListMeta
    success: bool = True


STATUS_BY_ERROR: list[tuple[type[de.DomainError], int]] = [
    (de.ValidationFailed, 400),
    (de.BlockedAddress, 400),
    (de.NotFound, 404),
    (de.Conflict, 409),
    (de.PlanLimitReached, 403),
    (de.PlanRequired, 403),
    (de.PaymentRequired, 402),
    (de.QuotaExceeded, 403),
    (de.SubOrgForbidden, 403),
    (de.DncBlocked, 422),
    (de.Unprocessable, 422),
    (de.UpstreamFetchFailed, 502),
    (de.Forbidden, 403),
    (de.InsufficientScope, 403),
    (de.Unavailable, 503),
    (de.TooManyRequests, 429),
]

CODE_BY_STATUS = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "unprocessable_entity",
    500: "internal_error",
    503: "service_unavailable",
}


def status_for(error: de.DomainError) -> int:
    for kind, status in STATUS_BY_ERROR:
        if isinstance(error, kind):
            return status
    return 400


# The one place error envelopes are built: as bytes, as ASGI messages (the pipeline and the outermost ASGI
# layer answer before or around Litestar) and as Litestar responses (the exception handlers).

def router_error_body(code: str, message: str, details: dict[str, Any] | None = None) -> bytes:
    return msgspec.json.encode(ErrorEnvelope(ErrorBody(message, code, details)))


def auth_error_body(code: str, message: str, retry_after: int | None = None) -> bytes:
    return msgspec.json.encode(AuthErrorEnvelope(AuthErrorBody(code, message, retry_after)))


def json_messages(status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> list[Message]:
    """A whole JSON response as ASGI messages."""
    return response_messages(status, [(b"content-type", b"application/json"),
                                      (b"content-length", str(len(body)).encode()), *(headers or [])], body)


def router_error_messages(status: int, code: str, message: str, details: dict[str, Any] | None = None,
                          headers: list[tuple[bytes, bytes]] | None = None) -> list[Message]:
    return json_messages(status, router_error_body(code, message, details), headers)


def auth_error_messages(status: int, code: str, message: str, retry_after: int | None = None,
                        headers: list[tuple[bytes, bytes]] | None = None) -> list[Message]:
    return json_messages(status, auth_error_body(code, message, retry_after), headers)


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None) -> Response[bytes]:
    return Response(router_error_body(code, message, details), status_code=status, media_type="application/json",
                    headers=headers)


_FIELD_ERROR = re.compile(r"^Object (contains unknown|missing required) field `(?P<field>[^`]+)`$")
_BODY_KEY = "data"  # Litestar's name for the request body
_MISSING_PARAMETER = re.compile(r"^Missing required (?P<kind>\w+) parameter '(?P<name>[^']+)'")

# msgspec's messages, said in words (the type names are msgspec's, the words the client's)
_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
               "object": "a JSON object", "array": "an array", "datetime": "an RFC 3339 timestamp such as "
               "2026-03-09T09:00:00Z", "date": "a date such as 2026-03-09", "uuid": "a UUID", "null": "null"}
_REGEX = re.compile(r"^Expected `str` matching regex (?P<pattern>'.*'|\".*\")$")
_BOUND = re.compile(r"^Expected `[^`]+` (?P<op><=|>=|<|>) (?P<n>-?[0-9.e+]+)$")
_LENGTH = re.compile(r"^Expected `(?P<type>str|array|object)` of length (?P<op><=|>=) (?P<n>[0-9]+)$")
_TYPE = re.compile(r"^Expected `(?P<type>[^`]+)`, got `(?P<got>[^`]+)`$")
_NOT_ACCEPTED = "is not one of the accepted values"
_BOUND_WORDS = {"<=": "at most", ">=": "at least", "<": "less than", ">": "greater than"}
_UNITS = {"str": "characters", "array": "items", "object": "entries"}
_FIXED = {
    "Expected `datetime` with a timezone component": "must carry an explicit UTC offset or Z, "
                                                     "e.g. 2026-03-09T09:00:00Z",
    "Invalid RFC3339 encoded datetime": "must be an RFC 3339 timestamp such as 2026-03-09T09:00:00Z",
}


def in_words(message: str) -> str:
    """A validation message the way a client reads it: what is expected, never a regular expression."""
    if message in _FIXED:
        return _FIXED[message]
    if match := _REGEX.match(message):
        try:
            pattern = ast.literal_eval(match["pattern"])
        except (ValueError, SyntaxError):
            return UNKNOWN_PATTERN
        return words_for(pattern)
    if match := _LENGTH.match(message):
        n, unit = int(match["n"]), _UNITS[match["type"]]
        if match["op"] == ">=" and n == 1:
            return "must not be empty"
        return f"must have {_BOUND_WORDS[match['op']]} {n} {unit}"
    if match := _BOUND.match(message):
        return f"must be {_BOUND_WORDS[match['op']]} {match['n']}"
    if match := _TYPE.match(message):
        kinds = [kind.strip() for kind in match["type"].split("|")]
        words = [_TYPE_WORDS.get(kind, kind) for kind in kinds if kind != "null"]
        if match["got"] == "null" and "null" not in kinds:  # the field is there, its value is what is wrong
            return "must be " + " or ".join(words) + " (null is not accepted)"
        return "must be " + " or ".join(words or ["null"]) + (" (or null)" if "null" in kinds and words else "")
    if message.startswith("Invalid enum value"):
        return _NOT_ACCEPTED
    return message


def _validation_error(item: dict[str, Any]) -> tuple[str, str]:
    """One Litestar error item -> (field, message), naming the field as the client sent it."""
    key = str(item.get("key") or "")
    message = str(item.get("message") or "is invalid")
    body = item.get("source") == "body" or key == _BODY_KEY
    if key == _BODY_KEY:
        key = ""
    key = key.removeprefix("$.")
    if body and message == f"'{_BODY_KEY}'":  # the body was required but none was sent
        return "body", "a JSON request body is required"
    match = _FIELD_ERROR.match(message)
    if match:
        field = f"{key}.{match['field']}" if key else match["field"]
        return field, "is not an accepted field" if match[1] == "contains unknown" else "is required"
    return key or "body", in_words(message)


def _accepted_values(annotation: Any) -> list[str]:
    """The values a Literal or Enum type (inside Annotated, Optional or a union) accepts."""
    origin = get_origin(annotation)
    if origin is Literal:
        return [str(value) for value in get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(member.value) for member in annotation]
    if origin is not None:
        return [value for arg in get_args(annotation) for value in _accepted_values(arg)]
    return []


def _parameters(request: Request[Any, Any, Any]) -> dict[str, Any]:
    try:
        return dict(request.scope["route_handler"].parsed_fn_signature.parameters)
    except (KeyError, AttributeError):
        return {}


def _field_type(request: Request[Any, Any, Any], key: str) -> Any:
    """The declared type of a query/path parameter, or of a top-level field of the body, by its name."""
    parameters = _parameters(request)
    if key in parameters:
        return parameters[key].annotation
    return _member_type(parameters, key)


def _member_type(parameters: dict[str, Any], key: str) -> Any:
    """The declared type of the body's top-level field ``key`` (None: the body has no such field)."""
    body = parameters.get(_BODY_KEY)
    candidates = get_args(body.annotation) if body is not None else ()
    for struct in [body.annotation if body is not None else None, *candidates]:
        if isinstance(struct, type) and issubclass(struct, msgspec.Struct):
            for field in msgspec.structs.fields(struct):
                if field.encode_name == key:
                    return field.type
    return None


_NOT_AN_OBJECT = re.compile(r"^Expected `object`, got `[^`]+`$")


def _names_data_member(item: dict[str, Any], request: Request[Any, Any, Any] | None) -> bool:
    """Litestar keys an error of the whole body and one of a body field called ``data`` alike (``data``, its name for
    the body): the field's, when the body has such a field and the message is not the one a body that is no object
    gets (a ``data`` that must be an object too stays ambiguous, and is said of the body)."""
    if request is None or item.get("key") != _BODY_KEY or _NOT_AN_OBJECT.match(str(item.get("message") or "")):
        return False
    return _member_type(_parameters(request), _BODY_KEY) is not None


def _validation_errors(exc: ValidationException, request: Request[Any, Any, Any] | None = None) -> dict[str, str]:
    found: dict[str, str] = {}
    extra = exc.extra if isinstance(exc.extra, list) else []
    for item in extra:
        if not isinstance(item, dict):
            continue
        key, message = _validation_error(item)
        if key == "body" and _names_data_member(item, request):
            key = _BODY_KEY
        if message == _NOT_ACCEPTED and request is not None:
            accepted = _accepted_values(_field_type(request, key))
            if accepted:
                message = f"must be one of: {', '.join(accepted)}"
        found.setdefault(key, message)
    detail = exc.detail if isinstance(exc.detail, str) else ""
    missing = _MISSING_PARAMETER.match(detail)
    if not found and missing:  # Litestar's message names the internal path: name the parameter instead
        found[missing["name"]] = "is required"
    if not found:
        found["body"] = in_words(detail) if detail else "is invalid"
    return found


def handle_domain_error(_: Request[Any, Any, Any], exc: de.DomainError) -> Response[bytes]:
    retry_after = exc.retry_after_seconds if isinstance(exc, de.Unavailable | de.TooManyRequests) else None
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return error_response(status_for(exc), exc.code, exc.message, exc.details, headers=headers)


def handle_validation(request: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    errors = _validation_errors(exc, request)
    detail = exc.detail if isinstance(exc.detail, str) else "Validation failed"
    if "malformed" in detail.lower() or "decode" in detail.lower():
        return error_response(400, "bad_request", "Request body is not valid JSON", {"validation_errors": errors})
    return error_response(400, "bad_request", "Validation failed", {"validation_errors": errors})


def _allow(request: Request[Any, Any, Any], exc: HTTPException) -> str:
    """The methods the path serves, sorted, HEAD beside GET (Litestar's header lists them in set order, or not
    at all)."""
    listed = {v for k, v in (exc.headers or {}).items() if k.lower() == "allow"}
    methods = {m.strip().upper() for value in listed for m in value.split(",") if m.strip()}
    if not methods:
        handler = request.scope.get("route_handler")
        methods = set(getattr(handler, "http_methods", ()) or ())
    return allow_header(methods)


def handle_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    if isinstance(exc, NotFoundException):
        # Litestar's router answers a path parameter that does not parse (/agents/abc) as no route: it is an
        # invalid parameter, 400 naming it
        errors = path_parameter_errors(request.app, request.scope["path"]) if isinstance(
            exc.__cause__, ValueError) else {}
        if errors:
            return error_response(400, "bad_request", "Invalid path parameter", {"validation_errors": errors})
        return error_response(404, "not_found", "No such resource or route")
    if isinstance(exc, MethodNotAllowedException):
        return error_response(405, "method_not_allowed", "Method not allowed on this route",
                              headers={"Allow": _allow(request, exc)})
    code = CODE_BY_STATUS.get(status, "bad_request" if status < 500 else "internal_error")
    message = exc.detail if status < 500 and isinstance(exc.detail, str) else "Internal server error"
    return error_response(status, code, message)


OUTAGE_MESSAGE = "The service cannot reach its database right now; nothing was done. Try again shortly"


def outage_messages() -> list[Message]:
    """503 ``service_unavailable`` with ``Retry-After``: the database cannot be reached (entrypoints/outages.py)."""
    return router_error_messages(503, "service_unavailable", OUTAGE_MESSAGE,
                                 headers=[(b"retry-after", str(OUTAGE_RETRY_AFTER).encode())])


def handle_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    if is_database_outage(exc):
        log.warning("database unreachable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
        return error_response(503, "service_unavailable", OUTAGE_MESSAGE,
                              headers={"Retry-After": str(OUTAGE_RETRY_AFTER)})
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "Internal server error")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    de.DomainError: handle_domain_error,
    ValidationException: handle_validation,
    HTTPException: handle_http,
    Exception: handle_unexpected,
}
# before any router: a path no route serves (404) or a method its route does not (405)
ROUTING_EXCEPTION_HANDLERS: dict[Any, Any] = {
    HTTPException: handle_http,
    Exception: handle_unexpected,
}

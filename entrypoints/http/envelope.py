"""Response envelopes and the mapping from errors to statuses and codes."""

from __future__ import annotations

import logging
import re
from typing import Any, Generic, TypeVar

import msgspec
from litestar import Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    ValidationException,
)

from application.accounts import AuthenticationFailed
from domain import errors as de

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
    (de.SubOrgForbidden, 403),
    (de.DncBlocked, 422),
    (de.UpstreamFetchFailed, 502),
    (de.Forbidden, 403),
    (de.InsufficientScope, 403),
    (de.Unavailable, 503),
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


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None) -> Response[bytes]:
    body = msgspec.json.encode(ErrorEnvelope(ErrorBody(message, code, details)))
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def auth_error_body(code: str, message: str, retry_after: int | None = None) -> bytes:
    return msgspec.json.encode(AuthErrorEnvelope(AuthErrorBody(code, message, retry_after)))


_FIELD_ERROR = re.compile(r"^Object (contains unknown|missing required) field `(?P<field>[^`]+)`$")
_BODY_KEY = "data"  # Litestar's name for the request body


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
    return key or "body", message


def _validation_errors(exc: ValidationException) -> dict[str, str]:
    found: dict[str, str] = {}
    extra = exc.extra if isinstance(exc.extra, list) else []
    for item in extra:
        if not isinstance(item, dict):
            continue
        key, message = _validation_error(item)
        found.setdefault(key, message)
    if not found:
        found["body"] = exc.detail if isinstance(exc.detail, str) else "is invalid"
    return found


def handle_domain_error(_: Request[Any, Any, Any], exc: de.DomainError) -> Response[bytes]:
    headers = {"Retry-After": str(exc.retry_after_seconds)} if isinstance(exc, de.Unavailable) else None
    return error_response(status_for(exc), exc.code, exc.message, exc.details, headers=headers)


def handle_validation(_: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    errors = _validation_errors(exc)
    detail = exc.detail if isinstance(exc.detail, str) else "Validation failed"
    if "malformed" in detail.lower() or "decode" in detail.lower():
        return error_response(400, "bad_request", "Request body is not valid JSON", {"validation_errors": errors})
    return error_response(400, "bad_request", "Validation failed", {"validation_errors": errors})


def handle_http(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    if isinstance(exc, NotFoundException):
        return error_response(404, "not_found", "No such resource or route")
    if isinstance(exc, MethodNotAllowedException):
        headers = exc.headers or {}
        return error_response(405, "method_not_allowed", "Method not allowed on this route", headers=headers)
    code = CODE_BY_STATUS.get(status, "bad_request" if status < 500 else "internal_error")
    message = exc.detail if status < 500 and isinstance(exc.detail, str) else "Internal server error"
    return error_response(status, code, message)


def handle_auth_failure(_: Request[Any, Any, Any], exc: AuthenticationFailed) -> Response[bytes]:
    return Response(auth_error_body(exc.code, str(exc)), status_code=401, media_type="application/json")


def handle_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "Internal server error")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    de.DomainError: handle_domain_error,
    ValidationException: handle_validation,
    AuthenticationFailed: handle_auth_failure,
    HTTPException: handle_http,
    Exception: handle_unexpected,
}

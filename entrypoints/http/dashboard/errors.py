"""Errors on dashboard pages are pages (``error.html`` over the layout), never JSON: the router's exception
handlers, and the messages the gate sends before a handler runs (CSRF) or when one fails."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from litestar import Request
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.response import Response, Template
from litestar.types import Message

from domain import errors as de
from entrypoints.http.dashboard.navigation import PREFIX, SECTIONS
from entrypoints.http.dashboard.templating import ENVIRONMENT
from entrypoints.http.envelope import handle_http, status_for
from entrypoints.http.messages import response_messages
from entrypoints.outages import RETRY_AFTER_SECONDS as OUTAGE_RETRY_AFTER
from entrypoints.outages import is_database_outage

log = logging.getLogger("parley.dashboard")

TITLES = {400: "Something in the request is not right", 403: "Not allowed", 404: "Not found",
          405: "Not allowed", 409: "Conflict", 413: "Too large", 422: "Cannot do that", 429: "Slow down",
          500: "Something went wrong", 503: "Unavailable"}

def _context(request: Request[Any, Any, Any] | None, status: int, code: str, message: str) -> dict[str, Any]:
    from entrypoints.http.dashboard.view import STATE_KEY

    signed_in = request.scope.get("state", {}).get(STATE_KEY) if request is not None else None
    return {"sections": SECTIONS, "section": "", "prefix": PREFIX, "user": signed_in,
            "csrf_token": signed_in.csrf_token if signed_in else "", "flash": "", "errors": {}, "form": {},
            "status": status, "code": code, "title": TITLES.get(status, "Error"), "message": message}


def error_page(request: Request[Any, Any, Any], status: int, code: str, message: str) -> Template:
    return Template(template_name="error.html", context=_context(request, status, code, message),
                    status_code=status)


def error_page_messages(status: int, code: str, message: str,
                        headers: Sequence[tuple[bytes, bytes]] = ()) -> list[Message]:
    """An error page as ASGI messages (the gate answers before or around Litestar), with ``headers`` added."""
    body = ENVIRONMENT.get_template("error.html").render(_context(None, status, code, message)).encode()
    return response_messages(status, [(b"content-type", b"text/html; charset=utf-8"),
                                      (b"content-length", str(len(body)).encode()), *headers], body)


def on_domain_error(request: Request[Any, Any, Any], exc: de.DomainError) -> Template:
    status = status_for(exc)
    if isinstance(exc, de.NotFound):
        return error_page(request, 404, exc.code, "There is no such page in your organization.")
    return error_page(request, status, exc.code, exc.message)


def on_validation(request: Request[Any, Any, Any], exc: ValidationException) -> Template:
    # a path parameter of the wrong type names no page; anything else is a bad request
    in_path = any(isinstance(e, dict) and e.get("source") == "path" for e in (exc.extra or []))
    if in_path or (request.path_params is not None and any(str(p) in str(exc.detail) for p in request.path_params)):
        return error_page(request, 404, "not_found", "There is no such page in your organization.")
    return error_page(request, 400, "bad_request", "The request was not understood.")


def on_http(request: Request[Any, Any, Any], exc: HTTPException) -> Template:
    if isinstance(exc, NotFoundException):
        return error_page(request, 404, "not_found", "There is no such page.")
    status = exc.status_code
    message = exc.detail if status < 500 and isinstance(exc.detail, str) else "Something went wrong on our side."
    return error_page(request, status, "error", message)


OUTAGE_PAGE = "The dashboard cannot reach its database right now; nothing was done. Try again in a moment."


def outage_page_messages() -> list[Message]:
    """503 with ``Retry-After``: the database cannot be reached (entrypoints/outages.py)."""
    return error_page_messages(503, "service_unavailable", OUTAGE_PAGE,
                               [(b"retry-after", str(OUTAGE_RETRY_AFTER).encode())])


def on_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Template:
    if is_database_outage(exc):
        log.warning("database unreachable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
        page = error_page(request, 503, "service_unavailable", OUTAGE_PAGE)
        page.headers["Retry-After"] = str(OUTAGE_RETRY_AFTER)
        return page
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_page(request, 500, "internal_error", "Something went wrong on our side.")


EXCEPTION_HANDLERS: dict[Any, Any] = {
    de.DomainError: on_domain_error,
    ValidationException: on_validation,
    HTTPException: on_http,
    Exception: on_unexpected,
}


def routing_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    """No route matched: a page under /dashboard, the JSON envelope elsewhere."""
    if request.url.path == PREFIX or request.url.path.startswith(PREFIX + "/"):
        return on_http(request, exc)
    return handle_http(request, exc)

"""The audit log (owners and admins): the organization's state-changing requests by its keys and users, newest
first, filtered as ``GET /audit-events`` is (who, action, resource, days), through the same use case. Each row's
actor, action and resource link to the log filtered by them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from dishka import FromDishka
from litestar import Request
from litestar.response import Template

from application import audit as uc
from application.ports.audit import AuditFilter
from application.ports.platform import PageRequest
from domain.audit import ActorType
from domain.errors import ValidationFailed
from domain.parsing import MAX_ID
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import page_number, pages_of
from entrypoints.http.dashboard.view import View, field_errors

PER_PAGE = 50
SCOPES = ("organizations:read",)
FILTERS = ("actor_type", "actor_id", "action", "resource_type", "resource_id", "from", "to")


def _day(value: str, name: str) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValidationFailed.field(name, "must be a date (YYYY-MM-DD)") from None


def parse_filters(query: Mapping[str, str]) -> AuditFilter:
    """The page's query (empty fields ignored) as the use case's filter; ValidationFailed names the field."""
    kind = query.get("actor_type", "")
    if kind and kind not in ("api_key", "user"):
        raise ValidationFailed.field("actor_type", "must be api_key or user")
    raw_id = query.get("actor_id", "")
    if raw_id and not (raw_id.isascii() and raw_id.isdigit() and 1 <= int(raw_id) <= MAX_ID):
        raise ValidationFailed.field("actor_id", "must be a key's or a user's id")
    for name, limit in (("action", 80), ("resource_type", 60), ("resource_id", 100)):
        if len(query.get(name, "")) > limit:
            raise ValidationFailed.field(name, f"must be at most {limit} characters")
    first, last = _day(query.get("from", ""), "from"), _day(query.get("to", ""), "to")
    return AuditFilter(
        ActorType(kind) if kind else None, int(raw_id) if raw_id else None, query.get("action") or None,
        query.get("resource_type") or None, query.get("resource_id") or None,
        datetime.combine(first, time(), UTC) if first else None,
        datetime.combine(last + timedelta(days=1), time(), UTC) if last else None)


@page("GET", "/audit", section="audit", scopes=SCOPES)
async def audit_page(request: Request[Any, Any, Any], listing: FromDishka[uc.ListAuditEvents]) -> Template:
    view = View.of(request)
    query = {name: request.query_params.get(name, "").strip()[:120] for name in FILTERS}
    chosen = {name: value for name, value in query.items() if value}
    number = page_number(request)
    values: dict[str, Any] = {"form": query, "events": [], "total": 0, "page": number, "pages": 1,
                              "query": urlencode(chosen), "filtered": bool(chosen)}
    try:
        filters = parse_filters(query)
        found = await view.run(listing, lambda actor: uc.ListAuditEventsCommand(
            actor, filters, PageRequest(PER_PAGE, (number - 1) * PER_PAGE)))
    except ValidationFailed as exc:
        return view.page("audit.html", status=400, errors=field_errors(exc), error=exc.message, **values)
    values.update(events=found.items, total=found.total, pages=pages_of(found.total, PER_PAGE))
    return view.page("audit.html", **values)


HANDLERS = [audit_page]

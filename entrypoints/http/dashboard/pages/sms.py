"""SMS: the messages sent and received (``ListSms``, newest first, 25 a page, filtered by direction, status and
recipient as ``GET /sms`` filters them) and a form that sends one through ``SendSms``, the use case of ``POST /sms``
with its gates: the destination policy, the Do-Not-Call lists and the SMS opt-outs, the plan's quota and the
billing hold. Each refusal is shown on the form with the API's message (beside the recipient when it is about the
recipient), and nothing is sent or stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import sms as uc
from application import telephony
from application.context import Actor
from application.ports.platform import PageRequest
from application.ports.sms import SmsFilter
from domain.destinations import DestinationNotAllowed
from domain.dnc import DncUnavailable
from domain.errors import DncBlocked, DomainError, NotFound, ValidationFailed
from domain.sms import RecipientOptedOut
from domain.telephony import PhoneNumberStatus
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import page_number, pages_of
from entrypoints.http.dashboard.view import View, decode, field_errors
from entrypoints.http.envelope import status_for
from entrypoints.http.schemas.sms import SmsCreate, SmsDirection, SmsStatus

PER_PAGE = 25
NUMBERS = 200
STATUSES = get_args(SmsStatus)
DIRECTIONS = get_args(SmsDirection)
ABOUT_THE_RECIPIENT = (DncBlocked, RecipientOptedOut, DestinationNotAllowed)
"""Refusals shown beside the recipient's field (and above the form)."""


def _filters(view: View) -> dict[str, str]:
    """The list's filters from the URL (a value the API does not know is left out)."""
    query = view.request.query_params
    chosen = {"direction": query.get("direction", ""), "status": query.get("status", ""),
              "to": query.get("to", "").strip()[:40]}
    if chosen["direction"] not in DIRECTIONS:
        chosen["direction"] = ""
    if chosen["status"] not in STATUSES:
        chosen["status"] = ""
    return chosen


async def _senders(view: View, numbers: telephony.ListPhoneNumbers) -> list[tuple[str, str]]:
    """The form's senders: the organization's active numbers with SMS turned on, (id, number and label)."""
    found = await view.run(numbers, lambda actor: telephony.ListPhoneNumbersCommand(actor, PageRequest(NUMBERS)))
    return [(str(n.id), n.phone_number + (f" · {n.label}" if n.label else "")) for n in found.items
            if n.sms and n.status == PhoneNumberStatus.ACTIVE]


async def _listed(view: View, listing: uc.ListSms, numbers: telephony.ListPhoneNumbers) -> dict[str, Any]:
    chosen = _filters(view)
    number = page_number(view.request)
    filters = SmsFilter(chosen["to"] or None, chosen["status"] or None, chosen["direction"] or None)
    extra: dict[str, Any] = {}
    try:
        found = await view.run(listing, lambda actor: uc.ListSmsCommand(actor, filters,
                                                                        PageRequest(PER_PAGE, (number - 1) * PER_PAGE)))
    except ValidationFailed:
        extra = {"filter_errors": {"to": "is not a phone number in E.164 form, such as +14155550100"},
                 "list_status": 400}
        found = await view.run(listing, lambda actor: uc.ListSmsCommand(
            actor, SmsFilter(None, filters.status, filters.direction), PageRequest(PER_PAGE)))
    query = "&".join(f"{k}={v}" for k, v in chosen.items() if v and k != "to")
    return {"messages": found.items, "total": found.total, "page": number, "pages": pages_of(found.total, PER_PAGE),
            "chosen": chosen, "statuses": STATUSES, "directions": DIRECTIONS, "filter_query": query,
            "senders": await _senders(view, numbers), **extra}


@page("GET", "/sms", section="sms", scopes=("sms:read",))
async def sms(request: Request[Any, Any, Any], listing: FromDishka[uc.ListSms],
              numbers: FromDishka[telephony.ListPhoneNumbers]) -> Template:
    view = View.of(request)
    listed = await _listed(view, listing, numbers)
    return view.page("sms.html", status=listed.pop("list_status", 200), **listed)


def _command(actor: Actor, form: Mapping[str, str]) -> uc.SendSmsCommand:
    data = decode({"to": form.get("to", "").strip(), "body": form.get("body", ""),
                   "from_phone_number_id": form.get("from_phone_number_id", "").strip()}, SmsCreate)
    return uc.SendSmsCommand(actor, data.to, data.body, data.from_phone_number_id)


@page("POST", "/sms", operation="createSms", section="sms", scopes=("sms:write",))
async def send(request: Request[Any, Any, Any], use_case: FromDishka[uc.SendSms], listing: FromDishka[uc.ListSms],
               numbers: FromDishka[telephony.ListPhoneNumbers]) -> Response[Any] | Template:
    """``POST /sms`` from a form: sent, back to the list (its status moves with the carrier's receipts); refused,
    the form again with why (nothing stored: the page's transaction is rolled back)."""
    view = View.of(request)
    form = await view.form()
    try:
        message = await view.run(use_case, lambda actor: _command(actor, form))
    except DomainError as exc:
        status = status_for(exc)
        if (status >= 500 and not isinstance(exc, DncUnavailable)) or (
                isinstance(exc, NotFound) and not (exc.details or {}).get("field")):
            raise
        errors = field_errors(exc)
        if isinstance(exc, ABOUT_THE_RECIPIENT):
            errors.setdefault("to", exc.message)
        listed = await _listed(view, listing, numbers)
        listed.pop("list_status", None)
        return view.page("sms.html", status=status, form=form, errors=errors, error=exc.message,
                         refusal=exc.code, **listed)
    said = f"Message to {message.to_phone} {message.status}"
    if message.status == "failed":
        said += f" ({message.error_code})" if message.error_code else ""
    return view.redirect("/sms", said)


HANDLERS = [sms, send]

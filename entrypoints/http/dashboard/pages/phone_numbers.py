"""Phone numbers: the organization's numbers (``ListPhoneNumbers``: provider, the agent that answers its inbound
calls, voice and SMS), and, when the organization has a carrier provider (Twilio, Telnyx), searching the carrier's
numbers for sale (``SearchAvailableNumbers``, the use case of ``GET /telephony/providers/{id}/available-numbers``)
and buying one (``CreatePhoneNumber`` with ``purchase``, as ``POST /telephony/phone-numbers`` buys it: bought,
pointed at Parley and stored in one step, nothing kept when the carrier refuses). Removing a number asks first
(``GET .../delete`` says what happens; its form sends ``confirm``): a carrier's number is released there too
(``DeletePhoneNumber`` with ``release``), a simulator number is only removed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import agents
from application import telephony as uc
from application.carriers import is_carrier
from application.context import Actor
from application.ports.agents import AgentFilter
from application.ports.platform import PageRequest
from domain.errors import DomainError, NotFound, ValidationFailed
from domain.identity import persisted
from domain.telephony import PhoneNumber, TelephonyProvider
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View, decode, field_errors
from entrypoints.http.envelope import status_for
from entrypoints.http.schemas.telephony import PhoneNumberCreate

PER_PAGE = 50
PROVIDERS = 100
AGENTS = 200
CONFIRM_FIELD = "confirm"
SEARCH_LIMIT = 20


async def _providers(view: View, listing: uc.ListProviders) -> list[TelephonyProvider]:
    found = await view.run(listing, lambda actor: uc.ListProvidersCommand(actor, PageRequest(PROVIDERS)))
    return list(found.items)


async def _agents(view: View, listing: agents.ListAgents) -> list[tuple[str, str]]:
    found = await view.run(listing, lambda actor: agents.ListAgentsCommand(actor, AgentFilter(), PageRequest(AGENTS)))
    return [(str(a.id), a.name) for a in found.items]


async def _listed(view: View, numbers: uc.ListPhoneNumbers, providers: uc.ListProviders,
                  agent_list: agents.ListAgents) -> dict[str, Any]:
    number = page_number(view.request)
    found = await view.run(numbers, lambda actor: uc.ListPhoneNumbersCommand(
        actor, PageRequest(PER_PAGE, (number - 1) * PER_PAGE)))
    known = await _providers(view, providers)
    agent_names = dict(await _agents(view, agent_list))
    return {"numbers": found.items, "total": found.total, "page": number, "pages": pages_of(found.total, PER_PAGE),
            "providers": {persisted(p.id): p for p in known}, "agent_names": agent_names,
            "carriers": [p for p in known if is_carrier(p.type)]}


@page("GET", "/phone-numbers", section="phone_numbers", scopes=("telephony:read",))
async def phone_numbers(request: Request[Any, Any, Any], numbers: FromDishka[uc.ListPhoneNumbers],
                        providers: FromDishka[uc.ListProviders], agent_list: FromDishka[agents.ListAgents]
                        ) -> Template:
    view = View.of(request)
    listed = await _listed(view, numbers, providers, agent_list)
    carriers = listed["carriers"]
    return view.page("phone_numbers.html", search={"provider_id": str(carriers[0].id) if carriers else "",
                                                   "country": "US"}, **listed)


def _search_query(view: View) -> dict[str, str]:
    query = view.request.query_params
    return {name: query.get(name, "").strip()[:16] for name in ("provider_id", "country", "area_code", "contains")}


def _search_command(actor: Actor, chosen: Mapping[str, str]) -> uc.SearchAvailableNumbersCommand:
    """The search form as the API's query parameters are checked (the same patterns)."""
    provider = chosen.get("provider_id", "")
    if not provider.isdigit() or not 1 <= int(provider) <= 2**53:
        raise ValidationFailed.field("provider_id", "choose a carrier provider")
    country = chosen.get("country", "") or "US"
    if len(country) != 2 or not country.isascii() or not country.isalpha():
        raise ValidationFailed.field("country", "must be a two-letter country code, such as US")
    area_code = chosen.get("area_code") or None
    if area_code is not None and not (area_code.isascii() and area_code.isdigit() and len(area_code) <= 6):
        raise ValidationFailed.field("area_code", "must be up to 6 digits")
    contains = chosen.get("contains") or None
    if contains is not None and not all(c.isascii() and (c.isalnum() or c in "*+") for c in contains):
        raise ValidationFailed.field("contains", "may hold digits, letters, * and + only")
    return uc.SearchAvailableNumbersCommand(actor, int(provider), country.upper(), area_code, contains, SEARCH_LIMIT)


@page("GET", "/phone-numbers/available", section="phone_numbers", scopes=("telephony:read",))
async def available(request: Request[Any, Any, Any], searching: FromDishka[uc.SearchAvailableNumbers],
                    providers: FromDishka[uc.ListProviders], agent_list: FromDishka[agents.ListAgents]) -> Template:
    """The carrier's numbers for sale (``?provider_id=&country=&area_code=&contains=``), each with a button that
    buys it; a bad field is shown beside it, a carrier's refusal above the form (502)."""
    view = View.of(request)
    chosen = _search_query(view)
    context: dict[str, Any] = {"search": chosen,
                               "carriers": [p for p in await _providers(view, providers) if is_carrier(p.type)],
                               "agents": await _agents(view, agent_list)}
    try:
        found = await view.run(searching, lambda actor: _search_command(actor, chosen))
    except DomainError as exc:
        status = status_for(exc)
        if isinstance(exc, NotFound) and not (exc.details or {}).get("field"):
            raise
        errors = field_errors(exc)
        if isinstance(exc, ValidationFailed) and not errors:
            errors = {"provider_id": exc.message}
        return view.page("phone_numbers_available.html", status=status, errors=errors, error=exc.message,
                         **context)
    return view.page("phone_numbers_available.html", found=found, **context)


@page("POST", "/phone-numbers", operation="createPhoneNumber", section="phone_numbers",
      scopes=("telephony:write", "telephony:manage"))
async def buy(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreatePhoneNumber],
              providers: FromDishka[uc.ListProviders], agent_list: FromDishka[agents.ListAgents]
              ) -> Response[Any] | Template:
    """Buy a number the search found, as ``POST /telephony/phone-numbers`` with ``purchase: true``."""
    view = View.of(request)
    form = await view.form()
    try:
        body: dict[str, Any] = {"phone_number": form.get("phone_number", "").strip(),
                                "provider_id": form.get("provider_id", "").strip(), "purchase": True,
                                "capabilities": {"voice": True, "sms": form.get("sms") == "on"}}
        for name in ("label", "inbound_agent_id"):
            if form.get(name, "").strip():
                body[name] = form[name].strip()
        data = decode(body, PhoneNumberCreate)
        if data.provider_id is None:
            raise ValidationFailed.field("provider_id", "choose a carrier provider")
        created = await view.run(use_case, lambda actor: uc.CreatePhoneNumberCommand(
            actor, data.phone_number, data.provider_id, data.label, data.inbound_agent_id, True,
            form.get("sms") == "on", True))
    except DomainError as exc:
        if isinstance(exc, NotFound) and not (exc.details or {}).get("field"):
            raise
        search = {"provider_id": form.get("provider_id", ""), "country": form.get("country", "US"),
                  "area_code": form.get("area_code", ""), "contains": form.get("contains", "")}
        return view.page("phone_numbers_available.html", status=status_for(exc), form=form, errors=field_errors(exc),
                         error=exc.message, search=search, agents=await _agents(view, agent_list),
                         carriers=[p for p in await _providers(view, providers) if is_carrier(p.type)])
    return view.redirect("/phone-numbers", f"{created.phone_number} bought: it is now one of your numbers")


async def _number(view: View, getting: uc.GetPhoneNumber, providers: uc.GetProvider, number_id: int
                  ) -> dict[str, Any]:
    number: PhoneNumber = await view.run(getting, lambda actor: uc.GetPhoneNumberCommand(actor, number_id))
    provider = await view.run(providers, lambda actor: uc.GetProviderCommand(actor, number.provider_id))
    return {"number": number, "provider": provider, "release": is_carrier(provider.type)}


@page("GET", "/phone-numbers/{number_id:int}/delete", section="phone_numbers", scopes=("telephony:delete",))
async def confirm_delete(request: Request[Any, Any, Any], number_id: PathId, getting: FromDishka[uc.GetPhoneNumber],
                         providers: FromDishka[uc.GetProvider]) -> Template:
    view = View.of(request)
    return view.page("phone_number_delete.html", **await _number(view, getting, providers, number_id))


@page("POST", "/phone-numbers/{number_id:int}/delete", operation="deletePhoneNumber", section="phone_numbers",
      scopes=("telephony:delete",))
async def delete_number(request: Request[Any, Any, Any], number_id: PathId,
                        use_case: FromDishka[uc.DeletePhoneNumber], getting: FromDishka[uc.GetPhoneNumber],
                        providers: FromDishka[uc.GetProvider]) -> Response[Any] | Template:
    """Removed from the organization; a carrier's number released at the carrier too (``release``): a carrier's
    refusal shows the page again with its words and removes nothing."""
    view = View.of(request)
    detail = await _number(view, getting, providers, number_id)
    if (await view.form()).get(CONFIRM_FIELD) != "delete":
        return view.page("phone_number_delete.html", **detail)
    try:
        await view.run(use_case, lambda actor: uc.DeletePhoneNumberCommand(actor, number_id, detail["release"]))
    except DomainError as exc:
        if isinstance(exc, NotFound):
            raise
        return view.page("phone_number_delete.html", status=status_for(exc), error=exc.message, **detail)
    said = "released at the carrier and removed" if detail["release"] else "removed"
    return view.redirect("/phone-numbers", f"{detail['number'].phone_number} {said}")


HANDLERS = [phone_numbers, available, buy, confirm_delete, delete_number]

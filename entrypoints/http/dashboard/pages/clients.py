"""Clients (a partner organization's owners and admins): the partner's sub-organizations with their plan, billing
mode and this period's usage, creating one, setting one's billing mode (billed on the partner's invoice, or
directly), and working in one: the session switches into the client (as an API key sends ``X-Sub-Org-Id``), every
page then acts in it under an "acting as" bar, until the user goes back to the partner's own organization.

The pages of this section act in the partner's own organization even while the session works in a client
(``own``). An organization that is not a partner has no clients: the list says so, its forms are 404."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import accounts
from application import billing as billing_uc
from application import sessions as sessions_uc
from application import usage as uc
from application.context import Actor
from domain.errors import NotFound
from domain.organizations import PLANS
from entrypoints.http.dashboard.pages import SIGNED_IN, PathId, bounded, page
from entrypoints.http.dashboard.view import View, decode
from entrypoints.http.schemas.accounts import OrganizationCreate
from entrypoints.http.validation import require_non_blank

READ = ("organizations:read",)
WRITE = ("organizations:write",)
BILLING_MODES = (("partner", "On our invoice"), ("direct", "Pays its own"))


def _partner_only(view: View) -> None:
    """The forms of a section a non-partner does not have: 404, as for any page that is not there."""
    if view.signed_in is None or not view.signed_in.partner:
        raise NotFound("page", view.request.url.path)


async def _clients(view: View, listing: uc.ListClients) -> dict[str, Any]:
    if view.signed_in is None or not view.signed_in.partner:
        return {"partner": False, "clients": [], "period": "", "plans": PLANS, "modes": BILLING_MODES}
    found = await view.run(listing, lambda actor: uc.ListClientsCommand(actor))
    return {"partner": True, "clients": found.clients, "period": found.period, "plans": PLANS,
            "modes": BILLING_MODES}


@page("GET", "/sub-organizations", section="sub_organizations", scopes=READ, own=True)
async def clients_page(request: Request[Any, Any, Any], listing: FromDishka[uc.ListClients]) -> Template:
    view = View.of(request)
    return view.page("clients.html", **await _clients(view, listing))


@page("POST", "/sub-organizations", operation="createOrganization", section="sub_organizations", scopes=WRITE, own=True)
async def create(request: Request[Any, Any, Any], creating: FromDishka[accounts.CreateSubOrganization],
                 listing: FromDishka[uc.ListClients]) -> Response[Any] | Template:
    view = View.of(request)
    _partner_only(view)

    def command(actor: Actor, form: Mapping[str, str]) -> accounts.CreateSubOrganizationCommand:
        data = decode(form, OrganizationCreate)  # the API's body rules (POST /organizations)
        return accounts.CreateSubOrganizationCommand(actor, require_non_blank(data.name, "name"), data.plan)

    async def context() -> dict[str, Any]:
        return await _clients(view, listing)

    return await view.submit(creating, command, template="clients.html", context=context,
                             done=lambda org: view.redirect("/sub-organizations", f"Client {org.name} created"))


@page("POST", "/sub-organizations/{client_id:int}/billing-mode", section="sub_organizations", sudo=True,
      scopes=("billing:write",), own=True, operation="updateSubscription")
async def billing_mode(request: Request[Any, Any, Any], client_id: PathId,
                       reading: FromDishka[accounts.GetSubOrganization],
                       updating: FromDishka[billing_uc.UpdateSubscription],
                       listing: FromDishka[uc.ListClients]) -> Response[Any] | Template:
    """The client's billing mode, as the partner sets it through the API (PATCH /billing/subscription with
    ``X-Sub-Org-Id``): the partner's actor, working in the client."""
    view = View.of(request)
    _partner_only(view)
    client = await view.run(reading, lambda actor: accounts.GetSubOrganizationCommand(actor, bounded(client_id)))
    if client.parent_id is None:  # the partner's own organization, not one of its clients
        raise NotFound("organization", client_id)

    def command(actor: Actor, form: Mapping[str, str]) -> billing_uc.UpdateSubscriptionCommand:
        return billing_uc.UpdateSubscriptionCommand(replace(actor, organization_id=bounded(client_id)),
                                                    {"billing_mode": form.get("billing_mode", "")})

    async def context() -> dict[str, Any]:
        return await _clients(view, listing)

    def done(subscription: Any) -> Response[Any]:
        words = "billed on your invoice" if subscription.billing_mode == "partner" else "pays its own invoices"
        return view.redirect("/sub-organizations", f"{client.name} is {words}")

    return await view.submit(updating, command, template="clients.html", context=context, done=done)


@page("POST", "/sub-organizations/{client_id:int}/switch", operation="switchOrganization",
      section="sub_organizations", scopes=READ, own=True)
async def switch(request: Request[Any, Any, Any], client_id: PathId, acting: FromDishka[sessions_uc.ActAs]
                 ) -> Response[Any]:
    """Work in the client: every page from now on acts in it (the "acting as" bar says so)."""
    view = View.of(request)
    _partner_only(view)
    signed_in = view.signed_in
    assert signed_in is not None
    client = await acting.execute(sessions_uc.ActAsCommand(signed_in.session_hash, signed_in.organization_id,
                                                           bounded(client_id)))
    return view.redirect("", f"You are working in {client.name}")


@page("POST", "/sub-organizations/back", operation="switchOrganization",
      section="sub_organizations", scopes=SIGNED_IN, own=True)
async def back(request: Request[Any, Any, Any], acting: FromDishka[sessions_uc.ActAs]) -> Response[Any]:
    """Back to the user's own organization (any role: whoever works in a client can leave it)."""
    view = View.of(request)
    signed_in = view.signed_in
    assert signed_in is not None
    own = await acting.execute(sessions_uc.ActAsCommand(signed_in.session_hash, signed_in.organization_id, None))
    return view.redirect("/sub-organizations" if signed_in.partner and signed_in.manages else "",
                         f"Back to {own.name}")


HANDLERS = [clients_page, create, billing_mode, switch, back]

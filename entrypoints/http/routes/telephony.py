from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import telephony as uc
from application.context import Actor
from application.ports.platform import PageRequest
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.calls import parse_instant
from entrypoints.http.schemas.telephony import (
    AvailableNumberOut,
    CallStatsOut,
    PhoneNumberCreate,
    PhoneNumberOut,
    PhoneNumberUpdate,
    ProviderCreate,
    ProviderOut,
    ProviderUpdate,
)
from entrypoints.http.validation import require_non_blank, set_fields

TAGS = ["Telephony"]
ProviderId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Provider id")]
NumberId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Phone number id")]


@endpoint("GET", "/telephony/providers", operation_id="listTelephonyProviders",
          summary="List telephony providers (the built-in simulator is always there)", tags=TAGS,
          scopes=("telephony:read",))
async def list_providers(actor: FromDishka[Actor], use_case: FromDishka[uc.ListProviders], limit: Limit = 25,
                         offset: Offset = 0) -> ListEnvelope[ProviderOut]:
    page = await use_case.execute(uc.ListProvidersCommand(actor, PageRequest(limit, offset)))
    return ListEnvelope([ProviderOut.of(p) for p in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/telephony/providers", operation_id="createTelephonyProvider", location="/telephony/providers/{id}",
          summary="Add a telephony provider (credentials are write-only)", tags=TAGS, scopes=("telephony:manage",),
          idempotent=True, status_code=201,
          errors={400: "a twilio or telnyx provider without the credentials of its type",
                  409: "public_url_required: a carrier provider needs PARLEY_PUBLIC_BASE_URL (https)"})
async def create_provider(data: JSONBody[ProviderCreate], actor: FromDishka[Actor],
                          use_case: FromDishka[uc.CreateProvider]) -> Envelope[ProviderOut]:
    created = await use_case.execute(uc.CreateProviderCommand(
        actor, require_non_blank(data.name, "name"), data.type, data.credentials, data.settings, data.is_default))
    return Envelope(ProviderOut.of(created))


@endpoint("GET", "/telephony/providers/{id:int}", operation_id="getTelephonyProvider",
          summary="Get a telephony provider", tags=TAGS, scopes=("telephony:read",), errors={404: ""})
async def get_provider(id: ProviderId, actor: FromDishka[Actor],
                       use_case: FromDishka[uc.GetProvider]) -> Envelope[ProviderOut]:
    return Envelope(ProviderOut.of(await use_case.execute(uc.GetProviderCommand(actor, id))))


@endpoint("PATCH", "/telephony/providers/{id:int}", operation_id="updateTelephonyProvider",
          summary="Update a provider; credentials and settings are merged (null removes a key)", tags=TAGS,
          scopes=("telephony:manage",),
          errors={404: "", 409: ("the default provider cannot be un-defaulted; public_url_required: a carrier "
                                 "provider made the default needs PARLEY_PUBLIC_BASE_URL (https)")})
async def update_provider(id: ProviderId, data: JSONBody[ProviderUpdate], actor: FromDishka[Actor],
                          use_case: FromDishka[uc.UpdateProvider]) -> Envelope[ProviderOut]:
    patch = set_fields(data)
    if "name" in patch:
        patch["name"] = require_non_blank(patch["name"], "name")
    return Envelope(ProviderOut.of(await use_case.execute(uc.UpdateProviderCommand(actor, id, patch))))


@endpoint("DELETE", "/telephony/providers/{id:int}", operation_id="deleteTelephonyProvider",
          summary="Delete a provider (not the default, not the built-in one, not one with numbers)", tags=TAGS,
          scopes=("telephony:delete",), errors={404: "", 409: "built-in, default, or still has phone numbers"},
          status_code=204)
async def delete_provider(id: ProviderId, actor: FromDishka[Actor], use_case: FromDishka[uc.DeleteProvider]) -> None:
    await use_case.execute(uc.DeleteProviderCommand(actor, id))


@endpoint("GET", "/telephony/providers/{id:int}/available-numbers", operation_id="searchAvailableNumbers",
          summary="Search the provider's carrier for numbers to buy (twilio, telnyx)", tags=TAGS,
          scopes=("telephony:read",),
          errors={400: "the provider is not a carrier (only twilio and telnyx sell numbers)",
                  404: "", 502: "carrier_error: the carrier refused or did not answer (its message in details)"})
async def search_available_numbers(
    id: ProviderId,
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.SearchAvailableNumbers],
    country: Annotated[str, QueryParameter(min_length=2, max_length=2, pattern="^[A-Za-z]{2}$",
                                           description="ISO 3166 alpha-2")] = "US",
    area_code: Annotated[str | None, QueryParameter(min_length=1, max_length=6, pattern="^[0-9]+$")] = None,
    contains: Annotated[str | None, QueryParameter(min_length=1, max_length=16, pattern="^[0-9A-Za-z*+]+$",
                                                   description="Digits (or letters) the number contains")] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=50, description="At most this many numbers")] = 20,
) -> Envelope[list[AvailableNumberOut]]:
    found = await use_case.execute(uc.SearchAvailableNumbersCommand(actor, id, country, area_code, contains, limit))
    return Envelope([AvailableNumberOut.of(n) for n in found])


@endpoint("GET", "/telephony/phone-numbers", operation_id="listPhoneNumbers", summary="List phone numbers",
          tags=TAGS, scopes=("telephony:read",))
async def list_numbers(actor: FromDishka[Actor], use_case: FromDishka[uc.ListPhoneNumbers], limit: Limit = 25,
                       offset: Offset = 0,
                       provider_id: Annotated[int | None, QueryParameter(ge=1, le=MAX_ID)] = None,
                       ) -> ListEnvelope[PhoneNumberOut]:
    page = await use_case.execute(uc.ListPhoneNumbersCommand(actor, PageRequest(limit, offset), provider_id))
    return ListEnvelope([PhoneNumberOut.of(n) for n in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/telephony/phone-numbers", operation_id="createPhoneNumber",
          location="/telephony/phone-numbers/{id}",
          summary="Add a phone number (E.164) on a provider, optionally assigned to an inbound agent; purchase: true "
                  "buys it from the provider's carrier", tags=TAGS,
          scopes=("telephony:write", "telephony:manage"), idempotent=True, status_code=201,
          errors={409: "the organization already has this number; public_url_required: a carrier number needs "
                       "PARLEY_PUBLIC_BASE_URL",
                  502: "carrier_error: the carrier refused (its message in details); nothing was stored"})
async def create_number(data: JSONBody[PhoneNumberCreate], actor: FromDishka[Actor],
                        use_case: FromDishka[uc.CreatePhoneNumber]) -> Envelope[PhoneNumberOut]:
    capabilities = data.capabilities
    created = await use_case.execute(uc.CreatePhoneNumberCommand(
        actor, data.phone_number, data.provider_id, data.label, data.inbound_agent_id,
        capabilities.voice if capabilities else True, capabilities.sms if capabilities else False, data.purchase))
    return Envelope(PhoneNumberOut.of(created))


@endpoint("GET", "/telephony/phone-numbers/{id:int}", operation_id="getPhoneNumber", summary="Get a phone number",
          tags=TAGS, scopes=("telephony:read",), errors={404: ""})
async def get_number(id: NumberId, actor: FromDishka[Actor],
                     use_case: FromDishka[uc.GetPhoneNumber]) -> Envelope[PhoneNumberOut]:
    return Envelope(PhoneNumberOut.of(await use_case.execute(uc.GetPhoneNumberCommand(actor, id))))


@endpoint("PATCH", "/telephony/phone-numbers/{id:int}", operation_id="updatePhoneNumber",
          summary="Update a phone number: provider, label, inbound agent, capabilities", tags=TAGS,
          scopes=("telephony:write", "telephony:manage"),
          errors={404: "", 409: "public_url_required: a carrier number needs PARLEY_PUBLIC_BASE_URL",
                  502: "carrier_error: the carrier refused to point the number at Parley; nothing was changed"})
async def update_number(id: NumberId, data: JSONBody[PhoneNumberUpdate], actor: FromDishka[Actor],
                        use_case: FromDishka[uc.UpdatePhoneNumber]) -> Envelope[PhoneNumberOut]:
    patch = set_fields(data)
    patch.update(patch.pop("capabilities", {}))  # {voice?, sms?}: the number's own fields
    return Envelope(PhoneNumberOut.of(await use_case.execute(uc.UpdatePhoneNumberCommand(actor, id, patch))))


@endpoint("DELETE", "/telephony/phone-numbers/{id:int}", operation_id="deletePhoneNumber",
          summary="Remove a phone number from the organization; release=true also releases it at its carrier",
          tags=TAGS, scopes=("telephony:delete",),
          errors={404: "", 502: "carrier_error: the carrier refused to release it; nothing was removed"},
          status_code=204)
async def delete_number(id: NumberId, actor: FromDishka[Actor], use_case: FromDishka[uc.DeletePhoneNumber],
                        release: Annotated[bool, QueryParameter(description=(
                            "Also give the number back to the carrier (twilio, telnyx): it stops being yours there"
                        ))] = False) -> None:
    await use_case.execute(uc.DeletePhoneNumberCommand(actor, id, release))


@endpoint("GET", "/telephony/stats", operation_id="getTelephonyStats",
          summary="Calls by status, minutes, answer rate and average duration over a period (default 30 days)",
          tags=TAGS, scopes=("telephony:read",))
async def stats(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.GetTelephonyStats],
    start: Annotated[str | None, QueryParameter(max_length=64, format="date-time",
                                                description="RFC 3339; default end - 30 days")] = None,
    end: Annotated[str | None, QueryParameter(max_length=64, format="date-time",
                                              description="RFC 3339; default now")] = None,
) -> Envelope[CallStatsOut]:
    result = await use_case.execute(uc.GetTelephonyStatsCommand(actor, parse_instant(start, "start"),
                                                                parse_instant(end, "end")))
    return Envelope(CallStatsOut.of(result))


ROUTES = [list_providers, create_provider, get_provider, update_provider, delete_provider, search_available_numbers,
          list_numbers,
          create_number, get_number, update_number, delete_number, stats]

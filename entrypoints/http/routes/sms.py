from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar import Response
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import sms as uc
from application.context import Actor
from application.ports.platform import PageRequest
from application.ports.sms import SmsFilter
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import BILLING_HOLD, Instant, Limit, Offset, endpoint
from entrypoints.http.schemas.calls import parse_instant
from entrypoints.http.schemas.sms import InboundSmsCreate, InboundSmsOut, SmsCreate, SmsDirection, SmsOut, SmsStatus

TAGS = ["SMS"]
SmsId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="SMS message id")]
DNC_UNAVAILABLE = "dnc_unavailable: Do-Not-Call screening could not be completed, so nothing was sent"


@endpoint("POST", "/sms", operation_id="createSms", location="/sms/{id}",
          summary="Send an SMS (screened against every Do-Not-Call list and the SMS opt-out list)", tags=TAGS,
          scopes=("sms:write",), status_code=201,
          description=("201 with the message, queued: its status then moves forward only, with the carrier's "
                       "receipts (sent, then delivered or undelivered; or failed), each kept in status_events. "
                       "encoding and segments say how it is billed: GSM-7 160 characters (153 per part), "
                       "otherwise UCS-2 70 (67 per part)."),
          errors={400: "invalid body or phone number, or from_phone_number_id is not an active SMS number",
                  402: BILLING_HOLD, 404: "not_found: from_phone_number_id is not one of this organization's numbers",
                  422: ("dnc_blocked: the recipient is on a Do-Not-Call list; recipient_opted_out: the recipient "
                        "replied STOP"), 503: DNC_UNAVAILABLE})
async def create_sms(data: JSONBody[SmsCreate], actor: FromDishka[Actor],
                     use_case: FromDishka[uc.SendSms]) -> Response[Envelope[SmsOut]]:
    message = await use_case.execute(uc.SendSmsCommand(actor, data.to, data.body, data.from_phone_number_id))
    return Response(Envelope(SmsOut.of(message)), status_code=201)


@endpoint("GET", "/sms", operation_id="listSms", summary="List SMS messages, sent and received (newest first)",
          tags=TAGS, scopes=("sms:read",), errors={400: "invalid filter (to must be a phone number)"})
async def list_sms(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListSms],
    limit: Limit = 25,
    offset: Offset = 0,
    to: Annotated[str | None, QueryParameter(max_length=40, description="The recipient, E.164")] = None,
    status: Annotated[SmsStatus | None, QueryParameter()] = None,
    direction: Annotated[SmsDirection | None, QueryParameter()] = None,
    created_after: Instant = None,
    created_before: Instant = None,
) -> ListEnvelope[SmsOut]:
    filters = SmsFilter(to or None, status, direction, parse_instant(created_after, "created_after"),
                        parse_instant(created_before, "created_before"))
    page = await use_case.execute(uc.ListSmsCommand(actor, filters, PageRequest(limit, offset)))
    return ListEnvelope([SmsOut.of(x) for x in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/sms/{id:int}", operation_id="getSms", summary="Get an SMS message with its status events",
          tags=TAGS, scopes=("sms:read",), errors={404: ""})
async def get_sms(id: SmsId, actor: FromDishka[Actor], use_case: FromDishka[uc.GetSms]) -> Envelope[SmsOut]:
    return Envelope(SmsOut.of(await use_case.execute(uc.GetSmsCommand(actor, id))))


@endpoint("POST", "/telephony/simulator/inbound-sms", operation_id="simulateInboundSms",
          location="/sms/{id}",
          summary="Simulate an inbound SMS to one of the organization's numbers or to the shared sender "
                  "(STOP / START keep the opt-outs)",
          tags=TAGS, scopes=("telephony:manage",), status_code=201,
          description=("Stands for a carrier's inbound-message webhook: stores the message (status received) and "
                       "emits sms.received. A whole-message STOP, STOPALL, UNSUBSCRIBE, CANCEL, END or QUIT (any "
                       "case) puts the sender on the organization's \"SMS opt-outs\" Do-Not-Call list (made on "
                       "first use); START or UNSTOP takes it off (keywords are read after NFKC normalisation, "
                       "without zero-width characters). keyword says which applied. A reply to the simulator's "
                       "shared sender (+1555010099) reaches the organization that last texted its author from it."),
          errors={400: "invalid body or phone number",
                  404: "not_found: to is not one of this organization's phone numbers, or this organization was "
                       "not the last to text the author from the shared sender",
                  422: "sms_not_enabled: the number to has sms turned off"})
async def simulate_inbound_sms(data: JSONBody[InboundSmsCreate], actor: FromDishka[Actor],
                               use_case: FromDishka[uc.ReceiveSms]) -> Response[Envelope[InboundSmsOut]]:
    received = await use_case.execute(uc.ReceiveSmsCommand(actor, data.from_, data.to, data.body))
    return Response(Envelope(InboundSmsOut.received(received.message, received.keyword)), status_code=201)


ROUTES = [create_sms, list_sms, get_sms, simulate_inbound_sms]

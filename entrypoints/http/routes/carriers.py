"""The carriers' webhooks: call status, inbound calls, SMS receipts and inbound texts (docs/telephony.md).

Public routes: the carrier's signature is the credential. It is checked over the public URL Parley gave the
carrier (PARLEY_PUBLIC_BASE_URL + the path + the query string it was given) and the raw body, before the body is
parsed (403 otherwise). Whatever a verified webhook says, it is answered 2xx (a carrier retries anything else): a
callback about an unknown call or message, a replay or a late one changes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from dishka import FromDishka
from litestar import Request, Response
from litestar.params import PathParameter, QueryParameter

from application import carrier_calls as uc
from application import sms as sms_cases
from application.carriers import CarrierLinks
from application.ports.carriers import WebhookRequest
from domain.parsing import MAX_ID
from entrypoints.http.routing import endpoint

TAGS = ["Carrier webhooks"]
MAX_WEBHOOK_BYTES = 64 * 1024
"""A carrier's webhook is a few hundred bytes of form parameters (an SMS body at most 1,600 characters)."""
ProviderId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="The telephony provider the webhook is for")]
FORGED = "forbidden: the signature does not verify for this provider (or no such carrier provider)"
PUBLIC_NOTE = ("Called by the carrier, not by clients: authenticated by the carrier's signature (Twilio "
               "X-Twilio-Signature; Telnyx telnyx-signature-ed25519 and telnyx-timestamp) over the public URL and the "
               "raw body. Always 2xx once verified, so the carrier does not retry.")


async def webhook_request(request: Request[Any, Any, Any], links: CarrierLinks, path: str) -> WebhookRequest:
    """The webhook as the carrier sent it: the public URL it was given (signatures cover it), headers, raw body."""
    query = request.scope.get("query_string", b"").decode("latin-1")
    url = links.url(path) + (f"?{query}" if query else "")
    headers = {name.lower(): value for name, value in request.headers.items()}
    return WebhookRequest(url=url, headers=headers, body=await request.body())


@endpoint("POST", "/carriers/{provider_id:int}/voice/status", operation_id="carrierVoiceStatus",
          summary="A carrier's call status callback (initiated, ringing, answered, completed, AMD)", tags=TAGS,
          auth="public", status_code=204, description=PUBLIC_NOTE, errors={403: FORGED},
          request_max_body_size=MAX_WEBHOOK_BYTES)
async def voice_status(provider_id: ProviderId, request: Request[Any, Any, Any],
                       use_case: FromDishka[uc.ReceiveVoiceStatus], links: FromDishka[CarrierLinks],
                       call_id: Annotated[str | None, QueryParameter(max_length=64, description=(
                           "Parley's call id, as given to the carrier"))] = None) -> None:
    webhook = await webhook_request(request, links, f"/carriers/{provider_id}/voice/status")
    await use_case.execute(uc.ReceiveVoiceStatusCommand(provider_id, webhook, call_id))


@endpoint("POST", "/carriers/{provider_id:int}/voice/inbound", operation_id="carrierInboundCall",
          summary="A carrier's inbound call: answered with the number's agent (a media stream) or turned away",
          tags=TAGS, auth="public", description=PUBLIC_NOTE + " Twilio gets TwiML (<Connect><Stream>, or <Reject>).",
          errors={403: FORGED}, media_type="text/xml", status_code=200, request_max_body_size=MAX_WEBHOOK_BYTES)
async def voice_inbound(provider_id: ProviderId, request: Request[Any, Any, Any],
                        use_case: FromDishka[uc.ReceiveInboundCall], links: FromDishka[CarrierLinks]
                        ) -> Response[bytes]:
    webhook = await webhook_request(request, links, f"/carriers/{provider_id}/voice/inbound")
    reply = await use_case.execute(uc.ReceiveInboundCallCommand(provider_id, webhook))
    return Response(reply.body, status_code=reply.status, media_type=reply.content_type)


@endpoint("POST", "/carriers/{provider_id:int}/sms", operation_id="carrierSms",
          summary="A carrier's SMS webhook: delivery receipts and inbound texts (STOP / START keep the opt-outs)",
          tags=TAGS, auth="public", status_code=204, description=PUBLIC_NOTE, errors={403: FORGED},
          request_max_body_size=MAX_WEBHOOK_BYTES)
async def sms(provider_id: ProviderId, request: Request[Any, Any, Any],
              use_case: FromDishka[sms_cases.ReceiveCarrierSms], links: FromDishka[CarrierLinks]) -> None:
    webhook = await webhook_request(request, links, f"/carriers/{provider_id}/sms")
    await use_case.execute(sms_cases.ReceiveCarrierSmsCommand(provider_id, webhook))


ROUTES = [voice_status, voice_inbound, sms]

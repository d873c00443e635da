from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar import Response
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import calls as uc
from application import web_calls
from application.context import Actor, ApiBaseUrl
from application.ports.calls import CallFilter, CallLogFilter
from application.ports.platform import PageRequest
from domain.calls import CALL_ID_PATTERN, canonical_call_id
from domain.errors import ValidationFailed
from domain.metadata import check_metadata
from domain.parsing import MAX_ID, parse_id
from domain.recordings import RecordingLinkInvalid
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import BILLING_HOLD, Instant, Limit, Offset, endpoint
from entrypoints.http.schemas.calls import (
    CallCreate,
    CallLogOut,
    CallOut,
    CallStatus,
    RecordingLinkOut,
    TurnOut,
    WebCallCreate,
    WebCallOut,
    parse_instant,
)

TAGS = ["Calls"]
LOG_TAGS = ["Call logs"]
CallId = Annotated[str, PathParameter(pattern=CALL_ID_PATTERN, description="Call id (a UUID, any case)",
                                      schema_extra={"format": "uuid"})]
LogId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Call log id")]
DNC_UNAVAILABLE = "dnc_unavailable: Do-Not-Call screening could not be completed, so nothing was dialled"
@endpoint("POST", "/calls", operation_id="createCall", summary="Place an outbound call", tags=TAGS,
          location="/calls/{id}",
          scopes=("calls:schedule",), idempotent=True, status_code=201,
          errors={400: "invalid body or unresolved {{placeholders}} (details.missing_placeholders)",
                  402: BILLING_HOLD, 404: "unknown agent (bot_id)",
                  409: "invalid_transition: only an active agent can call",
                  422: "dnc_blocked: the destination is on a Do-Not-Call list", 503: DNC_UNAVAILABLE})
async def create_call(data: JSONBody[CallCreate], actor: FromDishka[Actor],
                      use_case: FromDishka[uc.PlaceCall]) -> Envelope[CallOut]:
    check_metadata("custom_data", data.custom_data)
    call = await use_case.execute(uc.PlaceCallCommand(
        actor, str(data.bot_id), data.destination_phone, data.contact_name, dict(data.custom_data or {})))
    return Envelope(CallOut.of(call))


def websocket_url(base: ApiBaseUrl, token: str) -> str:
    """The media stream's URL under the API's base: ``https`` becomes ``wss`` (``http`` ``ws``, in development)."""
    link = base.link(f"/media-streams/{token}")
    return "wss://" + link[8:] if link.startswith("https://") else "ws://" + link.removeprefix("http://")


def web_call_out(started: web_calls.WebCall, base: ApiBaseUrl) -> WebCallOut:
    return WebCallOut(started.call.id, started.token, websocket_url(base, started.token), started.expires_at)


@endpoint("POST", "/calls/web", operation_id="createWebCall", tags=TAGS, location="/calls/{call_id}",
          summary="Start a web call: talk to an agent from a browser",
          scopes=("calls:schedule",), idempotent=True, status_code=201,
          errors={400: "invalid body or unresolved {{placeholders}} (details.missing_placeholders)",
                  403: "quota_exceeded: the plan's call minutes are used up", 404: "unknown agent (agent_id)",
                  409: "invalid_transition: only an active agent can take calls"})
async def create_web_call(data: JSONBody[WebCallCreate], actor: FromDishka[Actor], base: FromDishka[ApiBaseUrl],
                          use_case: FromDishka[web_calls.StartWebCall]) -> Envelope[WebCallOut]:
    check_metadata("custom_data", data.custom_data)
    started = await use_case.execute(web_calls.StartWebCallCommand(
        actor.organization_id, data.agent_id, dict(data.custom_data or {})))
    return Envelope(web_call_out(started, base))


@endpoint("GET", "/calls", operation_id="listCalls", summary="List calls (newest first)", tags=TAGS,
          scopes=("calls:read",))
async def list_calls(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListCalls],
    limit: Limit = 25,
    offset: Offset = 0,
    status: Annotated[CallStatus | None, QueryParameter()] = None,
    agent_id: Annotated[int | None, QueryParameter(ge=1, le=MAX_ID)] = None,
    created_after: Instant = None,
    created_before: Instant = None,
    campaign_id: Annotated[int | None, QueryParameter(ge=1, le=MAX_ID)] = None,
) -> ListEnvelope[CallOut]:
    filters = CallFilter(status, agent_id, campaign_id, parse_instant(created_after, "created_after"),
                         parse_instant(created_before, "created_before"))
    page = await use_case.execute(uc.ListCallsCommand(actor, filters, PageRequest(limit, offset)))
    return ListEnvelope([CallOut.of(c) for c in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/calls/{id:str}", operation_id="getCall", summary="Get a call (poll status and results)",
          tags=TAGS, scopes=("calls:read",), errors={404: ""})
async def get_call(id: CallId, actor: FromDishka[Actor], use_case: FromDishka[uc.GetCall]) -> Envelope[CallOut]:
    return Envelope(CallOut.of(await use_case.execute(uc.GetCallCommand(actor, canonical_call_id(id)))))


@endpoint("POST", "/calls/{id:str}/cancel", operation_id="cancelCall",
          summary="Cancel a call while it is queued or ringing", tags=TAGS, scopes=("calls:cancel",),
          status_code=200, errors={404: "", 409: "invalid_transition: the call is past ringing"})
async def cancel_call(id: CallId, actor: FromDishka[Actor], use_case: FromDishka[uc.CancelCall]) -> Envelope[CallOut]:
    return Envelope(CallOut.of(await use_case.execute(uc.CancelCallCommand(actor, canonical_call_id(id)))))


@endpoint("GET", "/call-logs", operation_id="listCallLogs", summary="List call logs (newest first)",
          tags=LOG_TAGS, scopes=("calls:read",))
async def list_call_logs(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListCallLogs],
    limit: Limit = 25,
    offset: Offset = 0,
    agent_id: Annotated[int | None, QueryParameter(ge=1, le=MAX_ID)] = None,
    status: Annotated[CallStatus | None, QueryParameter()] = None,
    start: Annotated[str | None, QueryParameter(
        max_length=64, format="date-time", description="ended at or after (RFC 3339)")] = None,
    end: Annotated[str | None, QueryParameter(
        max_length=64, format="date-time", description="ended before (RFC 3339)")] = None,
) -> ListEnvelope[CallLogOut]:
    filters = CallLogFilter(agent_id, status, parse_instant(start, "start"), parse_instant(end, "end"))
    page = await use_case.execute(uc.ListCallLogsCommand(actor, filters, PageRequest(limit, offset)))
    return ListEnvelope([CallLogOut.of(x) for x in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/call-logs/{id:int}", operation_id="getCallLog", summary="Get a call log", tags=LOG_TAGS,
          scopes=("calls:read",), errors={404: ""})
async def get_call_log(id: LogId, actor: FromDishka[Actor],
                       use_case: FromDishka[uc.GetCallLog]) -> Envelope[CallLogOut]:
    return Envelope(CallLogOut.of(await use_case.execute(uc.GetCallLogCommand(actor, id))))


@endpoint("GET", "/call-logs/{id:int}/transcript", operation_id="getCallTranscript",
          summary="The call's transcript: turns of agent and contact with their offset from the answer",
          tags=LOG_TAGS, scopes=("calls:read",), errors={404: ""})
async def get_transcript(id: LogId, actor: FromDishka[Actor],
                         use_case: FromDishka[uc.GetCallLog]) -> Envelope[list[TurnOut]]:
    log = await use_case.execute(uc.GetCallLogCommand(actor, id))
    return Envelope([TurnOut.of(t) for t in log.transcript])


@endpoint("GET", "/call-logs/{id:int}/recording", operation_id="getCallRecording",
          summary="A signed URL to the call's WAV recording, valid for 15 minutes", tags=LOG_TAGS,
          scopes=("calls:recordings",), errors={404: "unknown call log, or the call has no recording"})
async def get_recording(id: LogId, actor: FromDishka[Actor],
                        use_case: FromDishka[uc.GetRecordingLink]) -> Envelope[RecordingLinkOut]:
    link = await use_case.execute(uc.GetRecordingLinkCommand(actor, id))
    return Envelope(RecordingLinkOut(link.url, link.expires_at))


@endpoint("GET", "/recordings/{file:str}", operation_id="downloadRecording",
          summary="Download a recording through its signed URL (no API key: the signature is the credential)",
          tags=LOG_TAGS, auth="public", errors={403: "forbidden: tampered or expired link", 404: ""},
          media_type="audio/wav")
async def download_recording(
    file: Annotated[str, PathParameter(max_length=40, description="<call log id>.wav")],
    use_case: FromDishka[uc.OpenRecording],
    expires: Annotated[int | None, QueryParameter(ge=0, le=2**40)] = None,
    signature: Annotated[str | None, QueryParameter(max_length=128)] = None,
) -> Response[bytes]:
    stem, _, extension = file.partition(".")
    try:
        call_log_id = parse_id(stem, "file") if extension == "wav" else None
    except ValidationFailed:
        call_log_id = None
    if call_log_id is None:  # not "<call log id>.wav": a tampered link
        raise RecordingLinkInvalid("This recording link is not valid")
    data = await use_case.execute(uc.OpenRecordingCommand(call_log_id, expires, signature))
    return Response(data, media_type="audio/wav", headers={
        "Content-Disposition": f'inline; filename="{call_log_id}.wav"', "Cache-Control": "private, max-age=60"})


ROUTES = [create_call, create_web_call, list_calls, get_call, cancel_call, list_call_logs, get_call_log, get_transcript,
          get_recording, download_recording]

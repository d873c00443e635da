from __future__ import annotations

import contextlib
import io
from typing import IO, Annotated, Any

from dishka import FromDishka
from litestar import Request
from litestar.exceptions import HTTPException
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import campaigns as uc
from application import dialer
from application.context import Actor
from application.ports.campaigns import CampaignFilter, ContactFilter
from application.ports.platform import PageRequest
from domain.campaigns import MAX_IMPORT_BYTES, CallingHours, ContactDraft, RetryPolicy
from domain.parsing import MAX_ID
from domain.patching import MergePatch, apply_patch
from domain.timezones import validate_timezone
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.multipart import CSV_UPLOAD
from entrypoints.http.routing import BILLING_HOLD, Limit, Offset, endpoint
from entrypoints.http.schemas.campaigns import (
    CampaignCreate,
    CampaignOut,
    CampaignUpdate,
    ContactOut,
    ContactsAdd,
    ContactsAdded,
    ContactStatus,
    DialedOut,
    DialIn,
    RejectedRow,
    Status,
)
from entrypoints.http.validation import require_non_blank, set_fields

TAGS = ["Campaigns"]
CampaignId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Campaign id")]
ContactId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Contact id")]
CSV_TYPES = ("text/csv", "text/plain", "application/csv", "application/vnd.ms-excel")
MAX_CONTACTS_BODY = 8 * 1024 * 1024  # 10,000 contacts with their custom_data
MULTIPART_SLACK = 64 * 1024  # boundaries and part headers around a file of MAX_IMPORT_BYTES
NOT_EDITABLE = "invalid_transition: the campaign is not draft or paused"
REFERENCE_NOT_FOUND = ("not_found: unknown campaign, or agent_id, schedule_id or from_phone_number_id is not one "
                       "of this organization's")
CONTACT_LIMIT = "campaign_contact_limit: the campaign would hold more than 100,000 contacts (nothing was added)"


def create_command(actor: Actor, data: CampaignCreate) -> uc.CreateCampaignCommand:
    return uc.CreateCampaignCommand(
        actor=actor,
        name=require_non_blank(data.name, "name"),
        agent_id=data.agent_id,
        schedule_id=data.schedule_id,
        timezone=validate_timezone(data.timezone),
        timezone_mode=data.timezone_mode,
        calling_hours=CallingHours(data.calling_hours.start, data.calling_hours.end),
        max_concurrent_calls=data.max_concurrent_calls,
        retry=apply_patch(RetryPolicy(), set_fields(data.retry)) if data.retry is not None else RetryPolicy(),
        from_phone_number_id=data.from_phone_number_id,
        completion=data.completion,
        allowed_countries=tuple(data.allowed_countries) if data.allowed_countries is not None else None,
        widget_max_contacts_per_hour=data.widget_max_contacts_per_hour,
    )


def _patch(data: CampaignUpdate) -> MergePatch:
    out = set_fields(data)
    if "name" in out:
        out["name"] = require_non_blank(out["name"], "name")
    if "timezone" in out:
        out["timezone"] = validate_timezone(out["timezone"])
    return out


def _added(result: uc.ContactsAdded) -> ContactsAdded:
    return ContactsAdded(result.accepted, result.duplicates,
                         [RejectedRow(r.row, r.field, r.message) for r in result.rejected], result.rejected_count)


@endpoint("GET", "/campaigns", operation_id="listCampaigns", summary="List campaigns (newest first)", tags=TAGS,
          scopes=("campaigns:read",))
async def list_campaigns(
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListCampaigns],
    limit: Limit = 25,
    offset: Offset = 0,
    status: Annotated[Status | None, QueryParameter()] = None,
) -> ListEnvelope[CampaignOut]:
    page = await use_case.execute(uc.ListCampaignsCommand(actor, CampaignFilter(status), PageRequest(limit, offset)))
    return ListEnvelope([CampaignOut.of(c) for c in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/campaigns", operation_id="createCampaign", location="/campaigns/{id}",
          summary="Create a campaign (as a draft)", tags=TAGS, scopes=("campaigns:write",), status_code=201,
          errors={404: "not_found: agent_id, schedule_id or from_phone_number_id is not one of this organization's"})
async def create_campaign(data: JSONBody[CampaignCreate], actor: FromDishka[Actor],
                          use_case: FromDishka[uc.CreateCampaign]) -> Envelope[CampaignOut]:
    return Envelope(CampaignOut.of(await use_case.execute(create_command(actor, data))))


@endpoint("GET", "/campaigns/{id:int}", operation_id="getCampaign",
          summary="Get a campaign with its contacts counted by status", tags=TAGS, scopes=("campaigns:read",),
          errors={404: ""})
async def get_campaign(id: CampaignId, actor: FromDishka[Actor],
                       use_case: FromDishka[uc.GetCampaign]) -> Envelope[CampaignOut]:
    detail = await use_case.execute(uc.GetCampaignCommand(actor, id))
    return Envelope(CampaignOut.of(detail.campaign, detail.stats))


@endpoint("PATCH", "/campaigns/{id:int}", operation_id="updateCampaign",
          summary="Update a draft or paused campaign (JSON merge patch)", tags=TAGS, scopes=("campaigns:write",),
          errors={404: REFERENCE_NOT_FOUND, 409: NOT_EDITABLE})
async def update_campaign(id: CampaignId, data: JSONBody[CampaignUpdate], actor: FromDishka[Actor],
                          use_case: FromDishka[uc.UpdateCampaign]) -> Envelope[CampaignOut]:
    return Envelope(CampaignOut.of(await use_case.execute(uc.UpdateCampaignCommand(actor, id, _patch(data)))))


@endpoint("DELETE", "/campaigns/{id:int}", operation_id="deleteCampaign",
          summary="Delete a draft, completed, cancelled or failed campaign with its contacts", tags=TAGS,
          scopes=("campaigns:delete",), status_code=204,
          errors={404: "", 409: "invalid_transition: the campaign is running or paused (cancel it first)"})
async def delete_campaign(id: CampaignId, actor: FromDishka[Actor], use_case: FromDishka[uc.DeleteCampaign]) -> None:
    await use_case.execute(uc.DeleteCampaignCommand(actor, id))


@endpoint("POST", "/campaigns/{id:int}/start", operation_id="startCampaign",
          summary="Start (or resume) a draft or paused campaign", tags=TAGS, scopes=("campaigns:execute",),
          status_code=200,
          errors={402: BILLING_HOLD, 404: "",
                  409: "invalid_transition: the campaign is not draft or paused, or its agent is not active",
                  422: "campaign_empty: the campaign has no contacts (and its completion is when_empty)"})
async def start_campaign(id: CampaignId, actor: FromDishka[Actor],
                         use_case: FromDishka[uc.StartCampaign]) -> Envelope[CampaignOut]:
    return Envelope(CampaignOut.of(await use_case.execute(uc.StartCampaignCommand(actor, id))))


@endpoint("POST", "/campaigns/{id:int}/pause", operation_id="pauseCampaign",
          summary="Pause a running campaign (no new dials; calls in progress finish)", tags=TAGS,
          scopes=("campaigns:execute",), status_code=200,
          errors={404: "", 409: "invalid_transition: the campaign is not running"})
async def pause_campaign(id: CampaignId, actor: FromDishka[Actor],
                         use_case: FromDishka[uc.PauseCampaign]) -> Envelope[CampaignOut]:
    return Envelope(CampaignOut.of(await use_case.execute(uc.PauseCampaignCommand(actor, id))))


@endpoint("POST", "/campaigns/{id:int}/cancel", operation_id="cancelCampaign",
          summary="Cancel a draft, running or paused campaign and its pending contacts", tags=TAGS,
          scopes=("campaigns:execute",), status_code=200,
          errors={404: "", 409: "invalid_transition: the campaign has ended already"})
async def cancel_campaign(id: CampaignId, actor: FromDishka[Actor],
                          use_case: FromDishka[uc.CancelCampaign]) -> Envelope[CampaignOut]:
    return Envelope(CampaignOut.of(await use_case.execute(uc.CancelCampaignCommand(actor, id))))


@endpoint("POST", "/campaigns/{id:int}/dial", operation_id="dialCampaignContact",
          summary="Dial one contact of a running campaign now (adding it first when a phone is given)", tags=TAGS,
          scopes=("campaigns:execute",), status_code=201, location="/calls/{call_id}",
          errors={400: "send contact_id or phone; unresolved placeholders", 402: BILLING_HOLD, 404: "",
                  409: "invalid_transition: the campaign is not running or the contact is not pending or "
                       "retry_wait; outside_calling_hours (details.next_open_at); concurrency_limit",
                  422: f"dnc_blocked; {CONTACT_LIMIT}"})
async def dial_contact(id: CampaignId, data: JSONBody[DialIn], actor: FromDishka[Actor],
                       use_case: FromDishka[dialer.DialContactNow]) -> Envelope[DialedOut]:
    done = await use_case.execute(dialer.DialContactNowCommand(actor, id, data.contact_id, data.phone, data.name,
                                                               dict(data.custom_data)))
    return Envelope(DialedOut(done.contact_id, done.call_id))


# -- contacts -------------------------------------------------------------------------------


@endpoint("POST", "/campaigns/{id:int}/contacts", operation_id="addCampaignContacts",
          summary="Add up to 10,000 contacts (bad rows are reported and skipped)", tags=TAGS,
          scopes=("campaigns:write",), status_code=201, request_max_body_size=MAX_CONTACTS_BODY,
          errors={400: "no row holds a valid contact (rows in error.details.rejected)", 404: "",
                  409: "invalid_transition: the campaign has ended", 422: CONTACT_LIMIT})
async def add_contacts(id: CampaignId, data: JSONBody[ContactsAdd], actor: FromDishka[Actor],
                       use_case: FromDishka[uc.AddContacts]) -> Envelope[ContactsAdded]:
    drafts = tuple(ContactDraft(n, c.phone, c.name, c.timezone, c.custom_data) for n, c in enumerate(data.contacts))
    return Envelope(_added(await use_case.execute(uc.AddContactsCommand(actor, id, drafts))))


async def _csv_file(request: Request[Any, Any, Any]) -> tuple[IO[bytes], Any]:
    """The uploaded CSV as a binary file (multipart field ``file``, or a text/csv body), and the form to
    close afterwards (None for a body)."""
    media_type = request.content_type[0]
    if media_type == "multipart/form-data":
        form = await request.form()
        try:
            file: IO[bytes] = CSV_UPLOAD.files(form)["file"][0].file
            file.seek(0, io.SEEK_END)
            size = file.tell()
            file.seek(0)
        except BaseException:
            await form.close()
            raise
        if size > MAX_IMPORT_BYTES:
            await form.close()
            raise HTTPException(status_code=413, detail=f"The file is larger than {MAX_IMPORT_BYTES // 2**20} MB")
        return file, form
    if media_type in CSV_TYPES:
        return io.BytesIO(await request.body()), None
    raise HTTPException(status_code=415, detail="Send the CSV as multipart/form-data (field `file`) or as text/csv")


@endpoint("POST", "/campaigns/{id:int}/contacts/import", operation_id="importCampaignContacts",
          summary="Import contacts from a CSV file (multipart field `file`; header row with phone, optional name "
                  "and timezone, other columns into custom_data; UTF-8; at most 10 MB)",
          tags=TAGS, scopes=("campaigns:write",), status_code=201,
          request_max_body_size=MAX_IMPORT_BYTES + MULTIPART_SLACK, form=CSV_UPLOAD,
          errors={400: "bad_request naming file: no header, no phone column, not UTF-8, or no row holds a valid "
                       "contact (rows in error.details.rejected)",
                  404: "", 409: "invalid_transition: the campaign has ended",
                  413: "payload_too_large: more than 10 MB",
                  415: "unsupported_media_type: send multipart/form-data or text/csv", 422: CONTACT_LIMIT})
async def import_contacts(id: CampaignId, request: Request[Any, Any, Any], actor: FromDishka[Actor],
                          use_case: FromDishka[uc.ImportContacts]) -> Envelope[ContactsAdded]:
    file, form = await _csv_file(request)
    text = io.TextIOWrapper(file, encoding="utf-8-sig", newline="")
    try:
        result = await use_case.execute(uc.ImportContactsCommand(actor, id, text))
    finally:
        text.detach()
        if form is not None:
            with contextlib.suppress(Exception):
                await form.close()
    return Envelope(_added(result))


@endpoint("GET", "/campaigns/{id:int}/contacts", operation_id="listCampaignContacts",
          summary="List a campaign's contacts (in the order they were added)", tags=TAGS,
          scopes=("campaigns:read",), errors={404: ""})
async def list_contacts(
    id: CampaignId,
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ListContacts],
    limit: Limit = 25,
    offset: Offset = 0,
    status: Annotated[ContactStatus | None, QueryParameter()] = None,
) -> ListEnvelope[ContactOut]:
    page = await use_case.execute(uc.ListContactsCommand(actor, id, ContactFilter(status),
                                                         PageRequest(limit, offset)))
    return ListEnvelope([ContactOut.of(c) for c in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/campaigns/{id:int}/contacts/{contactId:int}", operation_id="getCampaignContact",
          summary="Get a contact with its attempts", tags=TAGS, scopes=("campaigns:read",), errors={404: ""})
async def get_contact(id: CampaignId, contactId: ContactId, actor: FromDishka[Actor],
                      use_case: FromDishka[uc.GetContact]) -> Envelope[ContactOut]:
    detail = await use_case.execute(uc.GetContactCommand(actor, id, contactId))
    return Envelope(ContactOut.of(detail.contact, detail.attempts))


@endpoint("DELETE", "/campaigns/{id:int}/contacts/{contactId:int}", operation_id="deleteCampaignContact",
          summary="Remove a pending contact", tags=TAGS, scopes=("campaigns:write",), status_code=204,
          errors={404: "", 409: "invalid_transition: the contact is no longer pending"})
async def delete_contact(id: CampaignId, contactId: ContactId, actor: FromDishka[Actor],
                         use_case: FromDishka[uc.DeleteContact]) -> None:
    await use_case.execute(uc.DeleteContactCommand(actor, id, contactId))


ROUTES = [list_campaigns, create_campaign, get_campaign, update_campaign, delete_campaign, start_campaign,
          pause_campaign, cancel_campaign, dial_contact, add_contacts, import_contacts, list_contacts, get_contact,
          delete_contact]

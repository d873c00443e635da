from __future__ import annotations

from typing import Annotated, Any

from dishka import FromDishka
from litestar import Request
from litestar.exceptions import HTTPException
from litestar.params import JSONBody, PathParameter, QueryParameter

from application import dnc as uc
from application.context import Actor
from application.ports.platform import PageRequest
from domain.errors import ValidationFailed
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.multipart import CSV_UPLOAD
from entrypoints.http.routes.calls import DNC_UNAVAILABLE
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.dnc import (
    DncCheck,
    DncCheckResult,
    DncEntriesAdd,
    DncEntriesAdded,
    DncEntryOut,
    DncListCreate,
    DncListOut,
    RowProblemOut,
)
from entrypoints.http.validation import require_non_blank

TAGS = ["Do-Not-Call"]
ListId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="DNC list id")]
CSV_TYPES = ("text/csv", "text/plain", "application/csv", "application/vnd.ms-excel")


def _added(result: uc.AddedEntries) -> DncEntriesAdded:
    return DncEntriesAdded(result.list_id, result.received, result.added, result.already_listed,
                           [RowProblemOut(p.line, p.value, p.error) for p in result.invalid])


@endpoint("GET", "/dnc/lists", operation_id="listDncLists", summary="List Do-Not-Call lists", tags=TAGS,
          scopes=("dnc:read",))
async def list_lists(actor: FromDishka[Actor], use_case: FromDishka[uc.ListDncLists], limit: Limit = 25,
                     offset: Offset = 0) -> ListEnvelope[DncListOut]:
    page = await use_case.execute(uc.ListDncListsCommand(actor, PageRequest(limit, offset)))
    return ListEnvelope([DncListOut.of(x) for x in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/dnc/lists", operation_id="createDncList", summary="Create a Do-Not-Call list", tags=TAGS,
          location="/dnc/lists/{id}",
          scopes=("dnc:write",), idempotent=True, status_code=201)
async def create_list(data: JSONBody[DncListCreate], actor: FromDishka[Actor],
                      use_case: FromDishka[uc.CreateDncList]) -> Envelope[DncListOut]:
    created = await use_case.execute(uc.CreateDncListCommand(actor, require_non_blank(data.name, "name"),
                                                             data.description))
    return Envelope(DncListOut.of(created))


@endpoint("GET", "/dnc/lists/{id:int}", operation_id="getDncList", summary="Get a Do-Not-Call list", tags=TAGS,
          scopes=("dnc:read",), errors={404: ""})
async def get_list(id: ListId, actor: FromDishka[Actor], use_case: FromDishka[uc.GetDncList]) -> Envelope[DncListOut]:
    return Envelope(DncListOut.of(await use_case.execute(uc.GetDncListCommand(actor, id))))


@endpoint("DELETE", "/dnc/lists/{id:int}", operation_id="deleteDncList",
          summary="Delete a Do-Not-Call list and its entries", tags=TAGS, scopes=("dnc:write",), errors={404: ""},
          status_code=204)
async def delete_list(id: ListId, actor: FromDishka[Actor], use_case: FromDishka[uc.DeleteDncList]) -> None:
    await use_case.execute(uc.DeleteDncListCommand(actor, id))


@endpoint("GET", "/dnc/lists/{id:int}/entries", operation_id="listDncEntries",
          summary="List the numbers of a Do-Not-Call list", tags=TAGS, scopes=("dnc:read",), errors={404: ""})
async def list_entries(id: ListId, actor: FromDishka[Actor], use_case: FromDishka[uc.ListDncEntries],
                       limit: Limit = 25, offset: Offset = 0) -> ListEnvelope[DncEntryOut]:
    page = await use_case.execute(uc.ListDncEntriesCommand(actor, id, PageRequest(limit, offset)))
    return ListEnvelope([DncEntryOut.of(e) for e in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/dnc/lists/{id:int}/entries", operation_id="addDncEntries",
          summary="Add numbers to a Do-Not-Call list (bulk; all must be valid)", tags=TAGS, scopes=("dnc:write",),
          idempotent=True, status_code=201, errors={404: ""})
async def add_entries(id: ListId, data: JSONBody[DncEntriesAdd], actor: FromDishka[Actor],
                      use_case: FromDishka[uc.AddDncEntries]) -> Envelope[DncEntriesAdded]:
    result = await use_case.execute(uc.AddDncEntriesCommand(actor, id, tuple(data.phone_numbers), data.reason,
                                                            data.default_region))
    return Envelope(_added(result))


@endpoint("POST", "/dnc/lists/{id:int}/entries/import", operation_id="importDncEntries",
          summary="Import numbers from a CSV file (text/csv body, or multipart/form-data field `file`)", tags=TAGS,
          scopes=("dnc:write",), idempotent=True, status_code=201, form=CSV_UPLOAD,
          errors={404: "", 413: "", 415: "unsupported_media_type: send text/csv or multipart/form-data"})
async def import_entries(
    id: ListId,
    request: Request[Any, Any, Any],
    actor: FromDishka[Actor],
    use_case: FromDishka[uc.ImportDncCsv],
    default_region: Annotated[str | None, QueryParameter(pattern=r"^[A-Za-z]{2}$")] = None,
) -> Envelope[DncEntriesAdded]:
    media_type = request.content_type[0]
    if media_type == "multipart/form-data":
        form = await request.form()
        try:
            raw = await CSV_UPLOAD.files(form)["file"][0].read()
        finally:
            await form.close()
    elif media_type in CSV_TYPES:
        raw = await request.body()
    else:
        raise HTTPException(status_code=415, detail="Send the CSV as text/csv or as multipart/form-data (file)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationFailed.field("file", "must be UTF-8 text") from None
    return Envelope(_added(await use_case.execute(uc.ImportDncCsvCommand(actor, id, text, default_region))))


@endpoint("DELETE", "/dnc/lists/{id:int}/entries/{phone:str}", operation_id="removeDncEntry",
          summary="Remove a number from a Do-Not-Call list", tags=TAGS, scopes=("dnc:write",), errors={404: ""},
          status_code=204)
async def remove_entry(id: ListId, phone: Annotated[str, PathParameter(max_length=64, description="E.164 number")],
                       actor: FromDishka[Actor], use_case: FromDishka[uc.RemoveDncEntry]) -> None:
    await use_case.execute(uc.RemoveDncEntryCommand(actor, id, phone))


@endpoint("POST", "/dnc/check", operation_id="checkDnc",
          summary="Screen numbers against every Do-Not-Call list of the organization", tags=TAGS,
          scopes=("dnc:read",), status_code=200, errors={503: DNC_UNAVAILABLE})
async def check(data: JSONBody[DncCheck], actor: FromDishka[Actor],
                use_case: FromDishka[uc.CheckNumbers]) -> Envelope[list[DncCheckResult]]:
    results = await use_case.execute(uc.CheckNumbersCommand(actor, tuple(data.phone_numbers)))
    return Envelope([DncCheckResult(r.phone_number, r.blocked, r.list_ids) for r in results])


ROUTES = [list_lists, create_list, get_list, delete_list, list_entries, add_entries, import_entries, remove_entry,
          check]

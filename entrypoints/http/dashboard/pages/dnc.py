"""Do-Not-Call: the organization's lists with a search that finds a number on any of them (``CheckNumbers``, the
screening of ``POST /dnc/check``), creating a list, a list's numbers (paged), adding a number (``AddDncEntries``,
normalised as the API normalises it, with an optional region for a number written without its country code),
removing one (it asks first: ``GET .../remove`` names the number, its form sends ``confirm``; a post without it
changes nothing) and importing a CSV file (``ImportDncCsv``, the API's import: each rejected row shown with its line
and why), all through the Do-Not-Call use cases of the API."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Annotated, Any

from dishka import FromDishka
from litestar import Request
from litestar.datastructures import UploadFile
from litestar.params import PathParameter
from litestar.response import Response, Template

from application import dnc as uc
from application.context import Actor
from application.ports.platform import PageRequest
from domain.dnc import DncList, DncUnavailable
from domain.errors import NotFound, ValidationFailed
from domain.identity import persisted
from entrypoints.http.dashboard.pages import page
from entrypoints.http.dashboard.pages.params import PathId, page_number, pages_of
from entrypoints.http.dashboard.view import View, convert, field_errors
from entrypoints.http.routes.campaigns import MULTIPART_SLACK
from entrypoints.http.schemas.dnc import DncEntriesAdd, DncListCreate
from entrypoints.http.validation import require_non_blank

LISTS = 100
PER_PAGE = 50
CONFIRM_FIELD = "confirm"
MAX_IMPORT_BYTES = 1024 * 1024
"""The API's limit on a request body, so a file the API takes the dashboard takes too."""
Phone = Annotated[str, PathParameter(max_length=64)]


async def _lists(view: View, listing: uc.ListDncLists) -> list[DncList]:
    found = await view.run(listing, lambda actor: uc.ListDncListsCommand(actor, PageRequest(LISTS)))
    return list(found.items)


async def _search(view: View, checking: uc.CheckNumbers, lists: list[DncList]) -> dict[str, Any]:
    """``?phone=``: the number as the API normalises it and the lists that hold it (the same screening as
    ``POST /dnc/check``)."""
    raw = view.request.query_params.get("phone", "").strip()[:64]
    if not raw:
        return {}
    names = {persisted(x.id): x.name for x in lists}
    try:
        [checked] = await view.run(checking, lambda actor: uc.CheckNumbersCommand(actor, (raw,)))
    except ValidationFailed:
        return {"query": raw, "status": 400, "errors": {"phone": "is not a phone number in E.164 form, such as "
                                                                 "+14155550100"}}
    except DncUnavailable as exc:
        return {"query": raw, "status": 503, "error": exc.message}
    return {"query": raw, "found": checked, "found_lists": [(i, names.get(i, f"List {i}")) for i in checked.list_ids]}


@page("GET", "/dnc", section="dnc", scopes=("dnc:read",))
async def dnc(request: Request[Any, Any, Any], listing: FromDishka[uc.ListDncLists],
              checking: FromDishka[uc.CheckNumbers]) -> Template:
    view = View.of(request)
    lists = await _lists(view, listing)
    search = await _search(view, checking, lists)
    return view.page("dnc.html", lists=lists, **search)


@page("POST", "/dnc", operation="createDncList", section="dnc", scopes=("dnc:write",))
async def create_list(request: Request[Any, Any, Any], use_case: FromDishka[uc.CreateDncList],
                      listing: FromDishka[uc.ListDncLists]) -> Response[Any] | Template:
    view = View.of(request)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.CreateDncListCommand:
        body: dict[str, Any] = {"name": form.get("name", "")}
        if form.get("description", "").strip():
            body["description"] = form["description"]
        data = convert(body, DncListCreate)
        return uc.CreateDncListCommand(actor, require_non_blank(data.name, "name"), data.description)

    async def again() -> dict[str, Any]:
        return {"lists": await _lists(view, listing)}

    return await view.submit(use_case, command, template="dnc.html", context=again,
                             done=lambda made: view.redirect(f"/dnc/{made.id}", f"List {made.name} created"))


async def _entries(view: View, getting: uc.GetDncList, entries: uc.ListDncEntries, list_id: int) -> dict[str, Any]:
    number = page_number(view.request)
    dnc_list = await view.run(getting, lambda actor: uc.GetDncListCommand(actor, list_id))
    found = await view.run(entries, lambda actor: uc.ListDncEntriesCommand(
        actor, list_id, PageRequest(PER_PAGE, (number - 1) * PER_PAGE)))
    return {"dnc_list": dnc_list, "entries": found.items, "total": found.total, "page": number,
            "pages": pages_of(found.total, PER_PAGE)}


@page("GET", "/dnc/{list_id:int}", section="dnc", scopes=("dnc:read",))
async def dnc_list(request: Request[Any, Any, Any], list_id: PathId, getting: FromDishka[uc.GetDncList],
                   entries: FromDishka[uc.ListDncEntries]) -> Template:
    view = View.of(request)
    return view.page("dnc_list.html", **await _entries(view, getting, entries, list_id))


@page("POST", "/dnc/{list_id:int}/entries", operation="addDncEntries", section="dnc", scopes=("dnc:write",))
async def add_entry(request: Request[Any, Any, Any], list_id: PathId, use_case: FromDishka[uc.AddDncEntries],
                    getting: FromDishka[uc.GetDncList], entries: FromDishka[uc.ListDncEntries]
                    ) -> Response[Any] | Template:
    """One number, as ``POST /dnc/lists/{id}/entries`` adds numbers: normalised to E.164 (``default_region`` for a
    number written without its country code), kept once."""
    view = View.of(request)
    detail = await _entries(view, getting, entries, list_id)
    form = await view.form()
    body: dict[str, Any] = {"phone_numbers": [form.get("phone_number", "").strip()]}
    for name in ("reason", "default_region"):
        if form.get(name, "").strip():
            body[name] = form[name].strip()
    try:
        data = convert(body, DncEntriesAdd)
        result = await view.run(use_case, lambda actor: uc.AddDncEntriesCommand(
            actor, list_id, tuple(data.phone_numbers), data.reason, data.default_region))
    except ValidationFailed as exc:
        errors = {("phone_number" if k == "phone_numbers" else k): v for k, v in field_errors(exc).items()}
        return view.page("dnc_list.html", status=400, form=form, errors=errors, error=exc.message, **detail)
    shown = form.get("phone_number", "").strip()
    said = (f"{shown} added to {detail['dnc_list'].name}" if result.added
            else f"{shown} was already on {detail['dnc_list'].name}")
    return view.redirect(f"/dnc/{list_id}", said)


async def _entry(view: View, getting: uc.GetDncList, checking: uc.CheckNumbers, list_id: int,
                 phone: str) -> dict[str, Any]:
    """The list and one of its numbers (normalised), or a 404 page when the list does not hold it."""
    dnc_list = await view.run(getting, lambda actor: uc.GetDncListCommand(actor, list_id))
    try:
        [checked] = await view.run(checking, lambda actor: uc.CheckNumbersCommand(actor, (phone,)))
    except ValidationFailed:
        raise NotFound("dnc entry", phone) from None
    if list_id not in checked.list_ids:
        raise NotFound("dnc entry", phone)
    return {"dnc_list": dnc_list, "phone_number": checked.phone_number}


@page("GET", "/dnc/{list_id:int}/entries/{phone:str}/remove", section="dnc", scopes=("dnc:write",))
async def confirm_remove(request: Request[Any, Any, Any], list_id: PathId, phone: Phone,
                         getting: FromDishka[uc.GetDncList], checking: FromDishka[uc.CheckNumbers]) -> Template:
    view = View.of(request)
    return view.page("dnc_remove.html", **await _entry(view, getting, checking, list_id, phone))


@page("POST", "/dnc/{list_id:int}/entries/{phone:str}/remove", operation="removeDncEntry", section="dnc",
      scopes=("dnc:write",))
async def remove_entry(request: Request[Any, Any, Any], list_id: PathId, phone: Phone,
                       use_case: FromDishka[uc.RemoveDncEntry], getting: FromDishka[uc.GetDncList],
                       checking: FromDishka[uc.CheckNumbers]) -> Response[Any] | Template:
    view = View.of(request)
    entry = await _entry(view, getting, checking, list_id, phone)
    if (await view.form()).get(CONFIRM_FIELD) != "remove":
        return view.page("dnc_remove.html", **entry)
    await view.run(use_case, lambda actor: uc.RemoveDncEntryCommand(actor, list_id, entry["phone_number"]))
    return view.redirect(f"/dnc/{list_id}", f"{entry['phone_number']} removed from {entry['dnc_list'].name}")


@page("GET", "/dnc/{list_id:int}/import", section="dnc", scopes=("dnc:write",))
async def import_form(request: Request[Any, Any, Any], list_id: PathId, getting: FromDishka[uc.GetDncList]
                      ) -> Template:
    view = View.of(request)
    return view.page("dnc_import.html",
                     dnc_list=await view.run(getting, lambda actor: uc.GetDncListCommand(actor, list_id)))


@page("POST", "/dnc/{list_id:int}/import", operation="importDncEntries", section="dnc", scopes=("dnc:write",),
      upload=MAX_IMPORT_BYTES + MULTIPART_SLACK)
async def import_entries(request: Request[Any, Any, Any], list_id: PathId, use_case: FromDishka[uc.ImportDncCsv],
                         getting: FromDishka[uc.GetDncList]) -> Template:
    """The CSV import of the API (``ImportDncCsv``): the page answers with the numbers added, those already listed
    and each rejected row (its line, the value and why); a file with no valid number changes nothing."""
    view = View.of(request)
    dnc_list = await view.run(getting, lambda actor: uc.GetDncListCommand(actor, list_id))
    form = await request.form()
    upload = next((v for v in form.getall("file") if isinstance(v, UploadFile)), None) if "file" in form else None
    region = str(form.get("default_region") or "").strip()
    shown = {"default_region": region}
    if upload is None or not upload.filename:
        return view.page("dnc_import.html", status=400, dnc_list=dnc_list, form=shown,
                         errors={"file": "choose a CSV file"}, error="Choose a CSV file to import.")
    try:
        raw = await upload.read()
    finally:
        with contextlib.suppress(Exception):
            await upload.close()
    try:
        if len(raw) > MAX_IMPORT_BYTES:
            raise ValidationFailed.field("file", "is larger than 1 MB")
        if region and not (len(region) == 2 and region.isascii() and region.isalpha()):
            raise ValidationFailed.field("default_region", "must be a two-letter country code, such as US")
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ValidationFailed.field("file", "must be UTF-8 text") from None
        result = await view.run(use_case, lambda actor: uc.ImportDncCsvCommand(actor, list_id, text,
                                                                               region.upper() or None))
    except ValidationFailed as exc:
        rows = (exc.details or {}).get("rows", [])
        return view.page("dnc_import.html", status=400, dnc_list=dnc_list, form=shown, error=exc.message,
                         errors=field_errors(exc), file_name=upload.filename, rejected=rows)
    rejected = [{"line": p.line, "value": p.value, "error": p.error} for p in result.invalid]
    refreshed = await view.run(getting, lambda actor: uc.GetDncListCommand(actor, list_id))
    return view.page("dnc_import.html", status=201, dnc_list=refreshed, result=result, rejected=rejected,
                     file_name=upload.filename, form=shown)


HANDLERS = [dnc, create_list, dnc_list, add_entry, confirm_remove, remove_entry, import_form, import_entries]

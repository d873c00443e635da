"""Editing an agent's draft and its published versions: the edit form (every field of the draft, through the API's
PATCH rules: an error is shown beside its field), the versions list, a version compared with the draft (a line diff,
``difflib``, as a table), and restoring a version as the draft, which asks first (``GET .../restore`` says what
happens; its form sends ``confirm``; a post without it shows that page again and changes nothing)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from dishka import FromDishka
from litestar import Request
from litestar.response import Response, Template

from application import agents as uc
from application.context import Actor
from application.ports.phones import PhoneNormalizer
from application.ports.platform import PageRequest
from application.scheduling import calendars as cal
from domain.agents import Agent
from domain.errors import DomainError, ValidationFailed
from domain.identity import persisted
from entrypoints.http.dashboard.pages import PathId, bounded, page
from entrypoints.http.dashboard.view import View, convert
from entrypoints.http.envelope import status_for
from entrypoints.http.routes.agents import patch_of
from entrypoints.http.schemas.agents import AgentUpdate

VERSIONS = 100
CALENDARS = 200
CONFIRM_FIELD = "confirm"

TEXT_FIELDS = ("name", "prompt", "language", "agent_mode", "timezone", "voice.provider", "voice.voice_id",
               "llm.model", "voicemail.action")
"""Sent as typed (an empty name is an error beside it, an empty prompt clears it)."""
NUMBER_FIELDS = ("max_call_duration_seconds", "end_of_turn_silence_ms", "voice.speed", "llm.temperature")
"""Left as they are when empty."""
NULLABLE_FIELDS = ("description", "first_message", "transfer_phone", "calendar_id", "voice.provider_id",
                   "llm.provider_id", "transcriber.provider_id", "transcriber.model", "transcriber.language",
                   "voicemail.message")
"""Empty: cleared (null)."""
JSON_FIELDS = ("tools", "analysis_schema", "metadata")


def form_of(agent: Agent) -> dict[str, str]:
    """The edit form's fields as the draft holds them."""
    snapshot = agent.snapshot()
    form: dict[str, str] = {}
    for name in (*TEXT_FIELDS, *NUMBER_FIELDS, *NULLABLE_FIELDS):
        value: Any = snapshot
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        form[name] = "" if value is None else str(value)
    form["tools"] = json.dumps(snapshot["tools"], indent=2) if snapshot["tools"] else "[]"
    schema = snapshot["analysis_schema"]
    form["analysis_schema"] = "" if schema is None else json.dumps(schema, indent=2)
    form["metadata"] = json.dumps(snapshot["metadata"], indent=2) if snapshot["metadata"] else "{}"
    return form


def _json(form: Mapping[str, str], name: str, empty: Any) -> Any:
    text = form.get(name, "").strip()
    if not text:
        return empty
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValidationFailed.field(name, f"is not valid JSON ({exc})") from None


def _put(body: dict[str, Any], name: str, value: Any) -> None:
    outer, _, inner = name.partition(".")
    if inner:
        body.setdefault(outer, {})[inner] = value
    else:
        body[outer] = value


def body_of(form: Mapping[str, str], current: Agent) -> dict[str, Any]:
    """The form as a PATCH body: every field of the draft (the metadata replaced whole: a key left out is
    removed)."""
    body: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        if name in form:
            _put(body, name, form[name] if name in ("name", "prompt") else form[name].strip())
    for name in NUMBER_FIELDS:
        if form.get(name, "").strip():
            _put(body, name, form[name].strip())
    for name in NULLABLE_FIELDS:
        if name in form:
            _put(body, name, form[name].strip() or None)
    for name, empty in (("tools", []), ("analysis_schema", None)):
        if name in form:
            body[name] = _json(form, name, empty)
    if "metadata" in form:
        metadata = _json(form, "metadata", {})
        if not isinstance(metadata, dict):
            raise ValidationFailed.field("metadata", "must be a JSON object")
        body["metadata"] = {**{key: None for key in current.metadata if key not in metadata}, **metadata}
    for name in ("voice", "llm", "voicemail"):  # an empty required member is left as it is
        for key, value in list(body.get(name, {}).items()):
            if value == "":
                del body[name][key]
    return body


async def _calendars(view: View, calendars: cal.ListCalendars) -> list[Any]:
    found = await view.run(calendars, lambda actor: cal.ListCalendarsCommand(actor, PageRequest(CALENDARS)))
    return list(found.items)


async def _agent(view: View, getting: uc.GetAgent, agent_id: int) -> Agent:
    return await view.run(getting, lambda actor: uc.GetAgentCommand(actor, bounded(agent_id)))


@page("GET", "/agents/{agent_id:int}/edit", section="agents", scopes=("agents:write",))
async def edit_agent_page(request: Request[Any, Any, Any], agent_id: PathId, getting: FromDishka[uc.GetAgent],
                          calendars: FromDishka[cal.ListCalendars]) -> Template:
    view = View.of(request)
    agent = await _agent(view, getting, agent_id)
    return view.page("agent_edit.html", agent=agent, form=form_of(agent), calendars=await _calendars(view, calendars))


@page("POST", "/agents/{agent_id:int}/edit",
      operation="updateAgent", section="agents", scopes=("agents:write",))
async def edit_agent(request: Request[Any, Any, Any], agent_id: PathId, use_case: FromDishka[uc.UpdateAgent],
                     getting: FromDishka[uc.GetAgent], calendars: FromDishka[cal.ListCalendars],
                     phones: FromDishka[PhoneNormalizer]) -> Response[Any] | Template:
    view = View.of(request)
    agent = await _agent(view, getting, agent_id)

    def command(actor: Actor, form: Mapping[str, str]) -> uc.UpdateAgentCommand:
        return uc.UpdateAgentCommand(actor, bounded(agent_id),
                                     patch_of(convert(body_of(form, agent), AgentUpdate), phones))

    async def again() -> dict[str, Any]:
        return {"agent": agent, "calendars": await _calendars(view, calendars)}

    return await view.submit(use_case, command, template="agent_edit.html", context=again,
                             done=lambda saved: view.redirect(f"/agents/{agent_id}", "Draft saved"))


async def _versions(view: View, listing: uc.ListAgentVersions, agent: Agent) -> dict[str, Any]:
    found = await view.run(listing, lambda actor: uc.ListAgentVersionsCommand(actor, persisted(agent.id),
                                                                              PageRequest(VERSIONS)))
    return {"agent": agent, "versions": found.items, "total": found.total}


@page("GET", "/agents/{agent_id:int}/versions", section="agents", scopes=("agents:read",))
async def versions_page(request: Request[Any, Any, Any], agent_id: PathId, getting: FromDishka[uc.GetAgent],
                        listing: FromDishka[uc.ListAgentVersions]) -> Template:
    view = View.of(request)
    return view.page("agent_versions.html", **await _versions(view, listing, await _agent(view, getting, agent_id)))


ORDER = ("name", "description", "agent_mode", "language", "timezone", "prompt", "first_message", "voice", "llm",
         "transcriber", "max_call_duration_seconds", "end_of_turn_silence_ms", "voicemail", "transfer_phone",
         "calendar_id", "tools", "analysis_schema", "metadata")
"""The order of a configuration's lines (a stored snapshot's keys come back in the database's order)."""


def lines_of(snapshot: Mapping[str, Any]) -> list[str]:
    """A configuration as lines people read and compare: one line a setting (``voice.speed: 1.0``), a text of
    several lines indented under its name, tools, the analysis schema and the metadata as indented JSON."""
    out: list[str] = []
    for name in sorted(snapshot, key=lambda key: (ORDER.index(key) if key in ORDER else len(ORDER), key)):
        value = snapshot[name]
        if isinstance(value, dict) and name in ("voice", "llm", "transcriber", "voicemail"):
            out += [f"{name}.{key}: {_shown(value[key])}" for key in sorted(value)]
        elif isinstance(value, list | dict):
            out.append(f"{name}:")
            out += ["  " + line for line in json.dumps(value, indent=2, sort_keys=True).splitlines()]
        elif isinstance(value, str) and "\n" in value:
            out.append(f"{name}:")
            out += ["  " + line for line in value.splitlines()]
        else:
            out.append(f"{name}: {_shown(value)}")
    return out


def _shown(value: Any) -> str:
    return "(none)" if value is None else str(value)


def diff_rows(before: list[str], after: list[str]) -> list[dict[str, Any]]:
    """Side by side: ``kind`` (same, changed, removed, added), each side's line number and text (None where the
    side has no line)."""
    rows: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [{"kind": "same", "old_no": i + 1, "old": before[i], "new_no": j + 1, "new": after[j]}
                     for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            old = before[i] if i < i2 else None
            new = after[j] if j < j2 else None
            kind = "changed" if old is not None and new is not None else "removed" if new is None else "added"
            rows.append({"kind": kind, "old_no": i + 1 if old is not None else None, "old": old,
                         "new_no": j + 1 if new is not None else None, "new": new})
    return rows


@page("GET", "/agents/{agent_id:int}/versions/{version:int}", section="agents", scopes=("agents:read",))
async def version_diff(request: Request[Any, Any, Any], agent_id: PathId, version: PathId,
                       getting: FromDishka[uc.GetAgent], snapshot: FromDishka[uc.GetAgentVersion]) -> Template:
    view = View.of(request)
    agent = await _agent(view, getting, agent_id)
    found = await view.run(snapshot, lambda actor: uc.GetAgentVersionCommand(actor, persisted(agent.id),
                                                                             bounded(version)))
    rows = diff_rows(lines_of(found.snapshot), lines_of(agent.snapshot()))
    changed = sum(1 for row in rows if row["kind"] != "same")
    return view.page("agent_version.html", agent=agent, version=found, rows=rows, changed=changed)


async def _confirmation(view: View, getting: uc.GetAgent, snapshot: uc.GetAgentVersion, agent_id: int,
                        version: int, status: int = 200, error: str = "") -> Template:
    agent = await _agent(view, getting, agent_id)
    found = await view.run(snapshot, lambda actor: uc.GetAgentVersionCommand(actor, persisted(agent.id),
                                                                             bounded(version)))
    return view.page("agent_restore.html", status=status, agent=agent, version=found, error=error)


@page("GET", "/agents/{agent_id:int}/versions/{version:int}/restore", section="agents", scopes=("agents:write",))
async def confirm_restore(request: Request[Any, Any, Any], agent_id: PathId, version: PathId,
                          getting: FromDishka[uc.GetAgent], snapshot: FromDishka[uc.GetAgentVersion]) -> Template:
    return await _confirmation(View.of(request), getting, snapshot, agent_id, version)


@page("POST", "/agents/{agent_id:int}/versions/{version:int}/restore",
      operation="restoreAgentVersion", section="agents", scopes=("agents:write",))
async def restore_version(request: Request[Any, Any, Any], agent_id: PathId, version: PathId,
                          use_case: FromDishka[uc.RestoreAgentVersion], getting: FromDishka[uc.GetAgent],
                          snapshot: FromDishka[uc.GetAgentVersion]) -> Response[Any] | Template:
    view = View.of(request)
    if (await view.form()).get(CONFIRM_FIELD) != "restore":
        return await _confirmation(view, getting, snapshot, agent_id, version)
    try:
        await view.run(use_case, lambda actor: uc.RestoreAgentVersionCommand(actor, bounded(agent_id),
                                                                             bounded(version)))
    except DomainError as exc:
        status = status_for(exc)
        if status >= 500 or status == 404:
            raise
        return await _confirmation(view, getting, snapshot, agent_id, version, status, exc.message)
    return view.redirect(f"/agents/{agent_id}", f"Version {version} restored as the draft: publish to make calls "
                                                "use it")


HANDLERS = [edit_agent_page, edit_agent, versions_page, version_diff, confirm_restore, restore_version]

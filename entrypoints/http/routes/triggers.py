from __future__ import annotations

from typing import Annotated

from dishka import FromDishka
from litestar.params import JSONBody, PathParameter, QueryParameter
from msgspec import UnsetType

from application import triggers as uc
from application.context import Actor
from application.ports.platform import PageRequest
from domain.parsing import MAX_ID
from entrypoints.http.envelope import Envelope, ListEnvelope, ListMeta
from entrypoints.http.routing import Limit, Offset, endpoint
from entrypoints.http.schemas.triggers import (
    RunOut,
    RunStatus,
    TestResultOut,
    TriggerCreate,
    TriggerCreated,
    TriggerOut,
    TriggerTest,
    TriggerUpdate,
)
from entrypoints.http.validation import set_fields

TAGS = ["Triggers"]
TriggerId = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="Trigger id")]
_INVALID = {400: ("unknown event, a condition on a field the event does not carry or an operator that does not fit "
                  "its type, a bad template, URL (blocked_address) or phone number; the member is named")}


@endpoint("POST", "/triggers", operation_id="createTrigger", location="/triggers/{id}",
          summary="Create a trigger (its webhook signing secret is shown only in this response)", tags=TAGS,
          scopes=("triggers:write",), idempotent=True, secret=True, status_code=201, errors=_INVALID)
async def create_trigger(data: JSONBody[TriggerCreate], actor: FromDishka[Actor],
                         use_case: FromDishka[uc.CreateTrigger]) -> Envelope[TriggerCreated]:
    made = await use_case.execute(uc.CreateTriggerCommand(
        actor, data.name, data.event, [{"type": a.type, "config": a.config} for a in data.actions],
        data.conditions, data.enabled))
    return Envelope(TriggerCreated.created(made))


@endpoint("GET", "/triggers", operation_id="listTriggers", summary="List triggers", tags=TAGS,
          scopes=("triggers:read",))
async def list_triggers(actor: FromDishka[Actor], use_case: FromDishka[uc.ListTriggers], limit: Limit = 25,
                        offset: Offset = 0) -> ListEnvelope[TriggerOut]:
    page = await use_case.execute(uc.ListTriggersCommand(actor, PageRequest(limit, offset)))
    return ListEnvelope([TriggerOut.of(t) for t in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("GET", "/triggers/{id:int}", operation_id="getTrigger", summary="Get a trigger (no secret)", tags=TAGS,
          scopes=("triggers:read",), errors={404: ""})
async def get_trigger(id: TriggerId, actor: FromDishka[Actor],
                      use_case: FromDishka[uc.GetTrigger]) -> Envelope[TriggerOut]:
    return Envelope(TriggerOut.of(await use_case.execute(uc.GetTriggerCommand(actor, id))))


@endpoint("PATCH", "/triggers/{id:int}", operation_id="updateTrigger",
          summary="Change a trigger (conditions: null removes them; enabled: false pauses it)", tags=TAGS,
          scopes=("triggers:write",), errors={**_INVALID, 404: ""})
async def update_trigger(id: TriggerId, data: JSONBody[TriggerUpdate], actor: FromDishka[Actor],
                         use_case: FromDishka[uc.UpdateTrigger]) -> Envelope[TriggerOut]:
    changes = set_fields(data)
    if not isinstance(data.actions, UnsetType):  # given: set_fields found it too
        changes["actions"] = [{"type": a.type, "config": a.config} for a in data.actions]
    return Envelope(TriggerOut.of(await use_case.execute(uc.UpdateTriggerCommand(actor, id, changes))))


@endpoint("DELETE", "/triggers/{id:int}", operation_id="deleteTrigger", summary="Delete a trigger and its runs",
          tags=TAGS, scopes=("triggers:delete",), errors={404: ""}, status_code=204)
async def delete_trigger(id: TriggerId, actor: FromDishka[Actor], use_case: FromDishka[uc.DeleteTrigger]) -> None:
    await use_case.execute(uc.DeleteTriggerCommand(actor, id))


@endpoint("GET", "/triggers/{id:int}/runs", operation_id="listTriggerRuns",
          summary="The trigger's run log, newest first: one run per event, why it matched or not, each action",
          tags=TAGS, scopes=("triggers:read",), errors={404: ""})
async def list_runs(id: TriggerId, actor: FromDishka[Actor], use_case: FromDishka[uc.ListTriggerRuns],
                    limit: Limit = 25, offset: Offset = 0,
                    status: Annotated[RunStatus | None, QueryParameter()] = None) -> ListEnvelope[RunOut]:
    page = await use_case.execute(uc.ListTriggerRunsCommand(actor, id, status, PageRequest(limit, offset)))
    return ListEnvelope([RunOut.of(r) for r in page.items], ListMeta(page.total, page.limit, page.offset))


@endpoint("POST", "/triggers/{id:int}/test", operation_id="testTrigger",
          summary="Evaluate a sample event: whether it matches, why, and what each action would send (nothing is "
                  "sent or stored)", tags=TAGS, scopes=("triggers:write",), idempotent=True, status_code=200,
          errors={404: ""})
async def test_trigger(id: TriggerId, data: JSONBody[TriggerTest], actor: FromDishka[Actor],
                       use_case: FromDishka[uc.TestTrigger]) -> Envelope[TestResultOut]:
    return Envelope(TestResultOut.of(await use_case.execute(uc.TestTriggerCommand(actor, id, data.data))))


ROUTES = [create_trigger, list_triggers, get_trigger, update_trigger, delete_trigger, list_runs, test_trigger]

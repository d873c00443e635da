"""PATCH semantics shared by every PATCH endpoint: a merge patch at every depth (RFC 7396), and a PATCH
that changes nothing changes nothing (no updated_at bump, no ``*.updated`` event)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.memory.clock import ManualClock
from domain.patching import merge_patch
from tests.http.calls_support import unique_phone
from tests.http.scheduling_support import UNLIMITED, outbox
from tests.properties import examples
from tests.support.apps import Api, ApiFactory, Tenant


async def _clocked(make_api: ApiFactory, sql_url: str) -> tuple[Api, ManualClock, Tenant]:
    clock = ManualClock()
    api = await make_api(sql_url, clock=clock, **UNLIMITED)
    return api, clock, await api.tenant(org_type="partner")


async def _created(api: Api, tenant: Tenant, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = await api.client.post(f"/v2{path}", json=body, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()["data"]  # type: ignore[no-any-return]


async def _patch(api: Api, tenant: Tenant, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = await api.client.patch(f"/v2{path}", json=body, headers=tenant.headers)
    assert r.status_code == 200, (path, body, r.text)
    return r.json()["data"]  # type: ignore[no-any-return]


async def test_a_patch_that_changes_nothing_keeps_updated_at_on_every_patch_endpoint(
        make_api: ApiFactory, sql_url: str) -> None:
    api, clock, t = await _clocked(make_api, sql_url)
    agent = await _created(api, t, "/agents", {"name": "A", "description": "d", "llm": {"temperature": 0.5},
                                              "metadata": {"k": "v"}})
    resources: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = [
        (f"/agents/{agent['id']}", {"name": "A2"},
         [{}, {"name": "A", "description": "d"}, {"llm": {"temperature": 0.5}}, {"metadata": {"k": "v"}},
          {"metadata": {"gone": None}}, {"status": "draft"}, {"voice": {}}]),
    ]
    hook = await _created(api, t, "/webhooks", {"name": "H", "url": "https://hooks.example.com/p",
                                                "events": ["call.ended"]})
    resources.append((f"/webhooks/{hook['id']}", {"name": "H2"},
                      [{}, {"name": "H", "events": ["call.ended"]}, {"status": "active"}]))
    calendar = await _created(api, t, "/scheduling/calendars", {"name": "C", "timezone": "Europe/Berlin"})
    resources.append((f"/scheduling/calendars/{calendar['id']}", {"buffer_minutes": 5},
                      [{}, {"name": "C", "timezone": "Europe/Berlin", "agent_id": None}]))
    child = await _created(api, t, "/organizations", {"name": "Child", "plan": "business"})
    resources.append((f"/organizations/{child['id']}", {"plan": "enterprise"},
                      [{}, {"name": "Child", "plan": "business"}]))
    kb = await _created(api, t, "/knowledge-bases", {"name": "KB", "description": "x", "agent_id": agent["id"]})
    resources.append((f"/knowledge-bases/{kb['id']}", {"description": "y"},
                      [{}, {"name": "KB", "description": "x"}]))
    provider = await _created(api, t, "/telephony/providers", {"name": "P", "type": "sip",
                                                               "credentials": {"user": "u", "password": "p"},
                                                               "settings": {"region": "eu"}})
    resources.append((f"/telephony/providers/{provider['id']}", {"settings": {"region": "us"}},
                      [{}, {"name": "P", "status": "active"}, {"settings": {"region": "eu", "other": None}},
                       {"credentials": {"user": "u"}}, {"credentials": {}}]))
    number = await _created(api, t, "/telephony/phone-numbers", {"phone_number": unique_phone(), "label": "L"})
    resources.append((f"/telephony/phone-numbers/{number['id']}", {"label": "L2"},
                      [{}, {"label": "L", "inbound_agent_id": None}, {"capabilities": {"voice": True}}]))

    changed_by_no_op: list[tuple[str, dict[str, Any]]] = []
    for path, change, no_ops in resources:
        before = (await api.client.get(f"/v2{path}", headers=t.headers)).json()["data"]
        for body in no_ops:
            clock.advance(minutes=1)
            if await _patch(api, t, path, body) != before:
                changed_by_no_op.append((path, body))
        clock.advance(minutes=1)
        changed = await _patch(api, t, path, change)
        assert changed["updated_at"] > before["updated_at"], path
    assert changed_by_no_op == []
    kb_events = [data for kind, data in await outbox(api, t.organization_id, "knowledge_base.updated")]
    assert kb_events == [{"knowledge_base_id": kb["id"], "agent_id": agent["id"], "fields": ["description"]}]


async def test_nested_objects_of_telephony_resources_are_merged(any_api: Api) -> None:
    t = await any_api.tenant()
    provider = await _created(any_api, t, "/telephony/providers", {
        "name": "P", "type": "sip", "credentials": {"user": "u", "password": "p"},
        "settings": {"region": "eu", "proxy": "sip.example.com"}})
    merged = await _patch(any_api, t, f"/telephony/providers/{provider['id']}", {
        "settings": {"region": "us", "proxy": None, "codec": "opus"}, "credentials": {"password": None, "realm": "r"}})
    assert merged["settings"] == {"region": "us", "codec": "opus"}
    assert merged["credential_fields"] == ["realm", "user"] and merged["has_credentials"]
    removed = await _patch(any_api, t, f"/telephony/providers/{provider['id']}", {"credentials": None})
    assert removed["credential_fields"] == [] and not removed["has_credentials"]
    assert removed["settings"] == {"region": "us", "codec": "opus"}

    number = await _created(any_api, t, "/telephony/phone-numbers", {
        "phone_number": unique_phone(), "label": "Main", "capabilities": {"voice": False, "sms": True}})
    patched = await _patch(any_api, t, f"/telephony/phone-numbers/{number['id']}", {"capabilities": {"sms": False}})
    assert patched["capabilities"] == {"voice": False, "sms": False} and patched["label"] == "Main"
    for body, field in [({"capabilities": None}, "capabilities"), ({"capabilities": {"sms": None}}, "capabilities.sms"),
                        ({"provider_id": None}, "provider_id")]:
        refused = await any_api.client.patch(f"/v2/telephony/phone-numbers/{number['id']}", json=body,
                                             headers=t.headers)
        assert refused.status_code == 400, refused.text
        assert field in refused.json()["error"]["details"]["validation_errors"]


# --------------------------------------------------------------------------- the merge-patch property

_WORDS = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=12).filter(str.strip)
_META_KEYS = st.sampled_from(["a", "b", "c", "nested"])
_META_VALUES = st.recursive(st.none() | st.integers(-5, 5) | _WORDS | st.booleans(),
                            lambda inner: st.dictionaries(_META_KEYS, inner, max_size=3), max_leaves=6)


def _partial(**members: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects holding any subset of ``members``."""
    return st.fixed_dictionaries({}, optional=members)


_AGENT_PATCH = _partial(
    description=st.none() | _WORDS,
    prompt=_WORDS,
    first_message=st.none() | _WORDS,
    max_call_duration_seconds=st.integers(10, 14_400),
    voice=_partial(provider=_WORDS, voice_id=_WORDS),
    llm=_partial(model=_WORDS, temperature=st.floats(0, 2, allow_nan=False)),
    voicemail=_partial(action=st.sampled_from(["hangup", "leave_message"]), message=st.none() | _WORDS),
    metadata=st.dictionaries(_META_KEYS, _META_VALUES, max_size=4),
)


def _without_nulls(value: Any) -> Any:
    """A resource's JSON with null members dropped at every depth: null and absent say the same thing."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_AGENT_PATCH, second=_AGENT_PATCH)
async def test_patch_then_read_is_the_merge_patch_of_before_and_patch(
        any_api: Api, first: dict[str, Any], second: dict[str, Any]) -> None:
    api = any_api
    t = await api.tenant()
    agent = await _created(api, t, "/agents", {"name": "Prop", "description": "start",
                                              "voice": {"provider": "p0", "voice_id": "v0"},
                                              "llm": {"model": "m0", "temperature": 1.25},
                                              "voicemail": {"action": "leave_message", "message": "hi"},
                                              "metadata": {"a": 1, "nested": {"b": "x"}}})
    before = agent
    for patch in (first, second):
        await _patch(api, t, f"/agents/{agent['id']}", patch)
        after = (await api.client.get(f"/v2/agents/{agent['id']}", headers=t.headers)).json()["data"]
        expected = merge_patch(before, patch)
        assert _without_nulls({**after, "updated_at": None}) == _without_nulls({**expected, "updated_at": None})
        before = after

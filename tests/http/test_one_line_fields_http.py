"""One-line fields refuse line breaks and other control characters everywhere (400 naming the field), through one
schema type (``entrypoints.http.schemas.OneLine``); multi-line fields keep their newlines. The schemas are walked so
a new one-line field cannot forget the rule, and a table of routes checks the answer over HTTP."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import msgspec
import pytest
from msgspec import inspect as mi

import entrypoints.http.schemas as schemas
from domain.text import ONE_LINE_PATTERN, fold_line, is_one_line
from tests.support.apps import Api

ONE_LINE_NAMES = frozenset({"name", "source", "label", "contact_name", "attendee_name", "external_id", "reason",
                            "subject", "title", "email", "provider", "voice_id", "model"})
"""Members that are one line wherever a request body carries them as text."""
CHECKED_ELSEWHERE = {("campaigns", "ContactIn", "name"), ("sessions", "LoginIn", "email"),
                     ("scheduling", "AppointmentCreate", "attendee_email"), ("agents", "ToolSchema", "name")}
"""A contacts batch reports a bad row and goes on: its rows are judged by ``domain.campaigns.check_row`` (the same
rule, ``domain.text``), as CSV rows are. A sign-in's email is only compared, never stored; an attendee's email has
an address pattern of its own (no white space), and so has a custom tool's name (letters, digits, _ and -)."""
MULTI_LINE = {("agents", "AgentCreate", "description"), ("agents", "AgentCreate", "first_message"),
              ("scheduling", "AppointmentCreate", "notes")}
HOSTILE = ("Eve\r\nBcc: x@y.example", "Eve\n", "tab\there", "nul\x00", "sep\u2028arator", "c1\x85")


def _strings(kind: Any) -> list[mi.StrType]:
    if isinstance(kind, mi.Metadata):
        return _strings(kind.type)
    if isinstance(kind, mi.StrType):
        return [kind]
    if isinstance(kind, mi.UnionType):
        return [s for member in kind.types for s in _strings(member)]
    return []


def _request_fields() -> list[tuple[str, str, str, list[mi.StrType]]]:
    found = []
    for module in pkgutil.iter_modules(schemas.__path__):
        loaded = importlib.import_module(f"{schemas.__name__}.{module.name}")
        for name, struct in vars(loaded).items():
            if not (isinstance(struct, type) and issubclass(struct, msgspec.Struct)
                    and struct.__module__ == loaded.__name__ and struct.__struct_config__.forbid_unknown_fields):
                continue  # request bodies forbid unknown members; responses are not checked
            for member in mi.type_info(struct).fields:  # type: ignore[attr-defined]
                texts = _strings(member.type)
                if texts:
                    found.append((module.name, name, member.name, texts))
    return found


def test_every_one_line_member_of_a_request_body_carries_the_rule() -> None:
    fields = _request_fields()
    assert len(fields) > 30
    missing = [(m, s, f) for m, s, f, texts in fields if f in ONE_LINE_NAMES and (m, s, f) not in CHECKED_ELSEWHERE
               and not all(t.pattern == ONE_LINE_PATTERN for t in texts)]
    assert missing == []
    multi = [(m, s, f) for m, s, f, texts in fields if (m, s, f) in MULTI_LINE]
    assert len(multi) == len(MULTI_LINE) and all(
        t.pattern is None for m, s, f, texts in fields if (m, s, f) in MULTI_LINE for t in texts)


@pytest.mark.parametrize("text", HOSTILE)
def test_the_rule_and_the_fold_agree(text: str) -> None:
    assert not is_one_line(text) and is_one_line(fold_line(text)) and len(fold_line(text)) == len(text)
    assert msgspec.json.decode(msgspec.json.encode(fold_line(text)), type=schemas.OneLine) == fold_line(text)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(msgspec.json.encode(text), type=schemas.OneLine)


ROUTES: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/v2/agents", {"name": "{}", "prompt": "Hi"}, "name"),
    ("POST", "/v2/campaigns", {"name": "{}", "agent_id": 1}, "name"),
    ("POST", "/v2/leads", {"phone": "+1555010000", "name": "{}", "agent_id": 1}, "name"),
    ("POST", "/v2/leads", {"phone": "+1555010000", "source": "{}", "agent_id": 1}, "source"),
    ("POST", "/v2/calls", {"bot_id": "1", "destination_phone": "+1555010000", "contact_name": "{}"}, "contact_name"),
    ("POST", "/v2/scheduling/calendars", {"name": "{}", "timezone": "UTC"}, "name"),
    ("POST", "/v2/webhooks", {"name": "{}", "url": "https://example.com/h", "events": ["call.ended"]}, "name"),
    ("POST", "/v2/api-keys", {"name": "{}", "scopes": ["agents:read"]}, "name"),
    ("POST", "/v2/triggers", {"name": "{}", "event": "call.ended", "actions": [
        {"type": "chat_message", "config": {"url": "https://example.com/h", "text": "x"}}]}, "name"),
    ("POST", "/v2/dnc/lists", {"name": "{}"}, "name"),
    ("POST", "/v2/schedules", {"name": "{}", "timezone": "UTC", "weekly": []}, "name"),
    ("POST", "/v2/knowledge-bases", {"name": "{}", "agent_id": 1}, "name"),
    ("POST", "/v2/telephony/providers", {"name": "{}", "type": "simulator"}, "name"),
]


def _with(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {k: text if v == "{}" else v for k, v in body.items()}


@pytest.mark.parametrize(("method", "path", "body", "field"), ROUTES, ids=[f"{r[1]}:{r[3]}" for r in ROUTES])
async def test_one_line_fields_refuse_control_characters(any_api: Api, method: str, path: str, body: dict[str, Any],
                                                         field: str) -> None:
    t = await any_api.tenant()
    for text in HOSTILE[:3]:
        r = await any_api.client.request(method, path, json=_with(body, text), headers=t.headers)
        assert r.status_code == 400, (text, r.text)
        error = r.json()["error"]
        assert error["code"] == "bad_request"
        assert error["details"]["validation_errors"] == {field: "must be one line: no line breaks, tabs or other "
                                                                "control characters"}, r.text


async def test_multi_line_fields_keep_their_newlines(any_api: Api) -> None:
    t = await any_api.tenant()
    made = await any_api.client.post("/v2/agents", json={
        "name": "Desk", "prompt": "Line one.\nLine two.", "description": "First.\r\nSecond."}, headers=t.headers)
    assert made.status_code == 201, made.text
    assert (made.json()["data"]["prompt"], made.json()["data"]["description"]) == (
        "Line one.\nLine two.", "First.\r\nSecond.")

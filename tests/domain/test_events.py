"""The event catalogue: closed, complete for what the code emits, and each entry self-describing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from domain import webhooks as wh
from domain.events import CATALOGUE, DomainEvent, EventType, require_catalogued, subject_of

ROOT = Path(__file__).resolve().parents[2]


def test_an_event_is_made_only_by_the_catalogue() -> None:
    made = EventType.CALL_ENDED(7, {"id": "c-1"})
    assert (made.type, made.organization_id, made.data) == ("call.ended", 7, {"id": "c-1"})
    assert require_catalogued(made) is made
    for free_form in ((7, "lead.created", {}), ("call.ended", 7, {})):
        with pytest.raises(TypeError):
            DomainEvent(*free_form)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EventType("lead.exploded")
    with pytest.raises(ValueError):
        EventType.WEBHOOK_TEST(7)  # sent directly by POST /webhooks/{id}/test, never through the outbox

    class Lookalike(DomainEvent):
        pass

    with pytest.raises(TypeError):
        require_catalogued(Lookalike(EventType.CALL_ENDED, 7))
    with pytest.raises(TypeError):
        require_catalogued(object())


def test_every_event_describes_itself_and_names_its_subject_in_its_example() -> None:
    for kind in EventType:
        assert kind.description and kind.group and kind.example, kind
        assert CATALOGUE[kind.value] is kind and kind == kind.value
        if kind.emitted:
            assert subject_of(kind, kind.example) == f"{kind.prefix}:{_at(kind.example, kind.subject)}", kind
            assert wh.resource_of(kind.value, kind.example) is not None
    assert wh.resource_of("appointment.rescheduled", EventType.APPOINTMENT_RESCHEDULED.example) == "appointment:77"
    assert wh.resource_of("webhook.test", EventType.WEBHOOK_TEST.example) is None


def _at(data: object, path: str) -> object:
    for part in path.split("."):
        data = data[part]  # type: ignore[index]
    return data


def test_no_event_name_is_written_out_where_events_are_emitted() -> None:
    """Use cases and the domain name events through EventType members only: a string literal shaped
    like an event of the catalogue in application/ or domain/ (outside the catalogue itself) would be
    an emission or a comparison that bypasses it."""
    found = []
    for folder in ("application", "domain"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "events.py" and path.parent.name == "domain":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in CATALOGUE:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert found == []

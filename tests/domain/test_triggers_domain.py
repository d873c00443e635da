"""Trigger conditions and templates: laws of the evaluator (hypothesis), checks against each event's declared
fields, and templates that are filled by substitution only."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.errors import ValidationFailed
from domain.events import EventType, FieldType
from domain.triggers import (
    MAX_CHAIN_DEPTH,
    Group,
    Predicate,
    TraceStep,
    Trigger,
    check_template,
    compare,
    comparison,
    decide,
    evaluate,
    lookup,
    matcher,
    parse_conditions,
    render,
    retry_delay,
)
from domain.triggers import _shown as shown
from tests.properties import examples

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)
fields = st.sampled_from(["data.status", "data.id", "data.name", "data.custom_data.crm_id", "data.tags"])
ops = st.sampled_from(["eq", "neq", "gt", "gte", "lt", "lte", "in", "contains", "exists"])
payloads = st.one_of(json_values, st.dictionaries(st.sampled_from(["status", "id", "name", "custom_data", "tags"]),
                                                   json_values, max_size=5))
predicates = st.builds(Predicate, fields, ops, st.one_of(json_scalars, st.lists(json_scalars, max_size=3)))
trees = st.recursive(predicates, lambda inner: st.builds(
    Group, st.sampled_from(["all", "any"]), st.lists(inner, min_size=1, max_size=3).map(tuple)), max_leaves=8)


@given(trees, payloads)
def test_evaluation_never_raises_and_traces_every_comparison(tree: Any, data: Any) -> None:
    result, trace = evaluate(tree, data)
    assert isinstance(result, bool)
    assert len(trace) == _leaves(tree)


def _leaves(node: Any) -> int:
    return 1 if isinstance(node, Predicate) else sum(_leaves(n) for n in node.items)


@given(predicates, payloads)
def test_a_group_of_one_is_that_one(p: Predicate, data: Any) -> None:
    alone = evaluate(p, data)[0]
    assert evaluate(Group("any", (p,)), data)[0] == alone == evaluate(Group("all", (p,)), data)[0]


@given(fields, json_scalars, payloads)
def test_neq_is_the_negation_of_eq(field: str, value: Any, data: Any) -> None:
    assert compare("neq", lookup(data, field), value) is not compare("eq", lookup(data, field), value)


@given(st.lists(predicates, min_size=1, max_size=4), payloads)
def test_de_morgan_with_neq(items: list[Predicate], data: Any) -> None:
    """not all(eq...) == any(neq...): the eq/neq pair behaves as a negation inside groups too."""
    eqs = tuple(Predicate(p.field, "eq", p.value if not isinstance(p.value, list) else None) for p in items)
    neqs = tuple(Predicate(p.field, "neq", p.value) for p in eqs)
    assert (not evaluate(Group("all", eqs), data)[0]) == evaluate(Group("any", neqs), data)[0]
    assert (not evaluate(Group("any", eqs), data)[0]) == evaluate(Group("all", neqs), data)[0]


@given(predicates, predicates, payloads)
def test_all_and_any_are_commutative(a: Predicate, b: Predicate, data: Any) -> None:
    for mode in ("all", "any"):
        assert evaluate(Group(mode, (a, b)), data)[0] == evaluate(Group(mode, (b, a)), data)[0]


@given(st.text(max_size=200), payloads)
def test_rendering_never_raises_and_leaves_text_without_placeholders_as_it_is(text: str, data: Any) -> None:
    out = render(text, data)
    assert isinstance(out, str)
    if "{{" not in text:
        assert out == text


def test_true_is_not_one_and_a_missing_member_is_not_null() -> None:
    assert not compare("eq", True, 1) and not compare("eq", 1, True) and compare("eq", 1, 1.0)
    missing = lookup({}, "data.status")
    assert not compare("eq", missing, None) and compare("neq", missing, None)
    assert compare("exists", missing, False) and not compare("exists", None, True)
    assert not compare("gt", "10", 5) and compare("gt", 10, 5) and not compare("gt", True, 0)


def test_every_event_declares_typed_fields() -> None:
    for kind in EventType:
        assert kind.fields and all(isinstance(t, FieldType) for t in kind.fields.values())
    assert EventType.CALL_ENDED.fields["duration_seconds"] is FieldType.NUMBER
    assert EventType.CALL_STARTED.fields["end_reason"] is FieldType.STRING  # null in the example
    assert EventType.LEAD_CREATED.fields["custom_data"] is FieldType.OBJECT


@pytest.mark.parametrize(("raw", "member"), [
    ({"all": [{"field": "data.nope", "op": "eq", "value": 1}]}, "conditions.all[0].field"),
    ({"all": [{"field": "data.duration_seconds", "op": "contains", "value": 1}]}, "conditions.all[0].op"),
    ({"all": [{"field": "data.status", "op": "in", "value": "busy"}]}, "conditions.all[0].value"),
    ({"all": [{"field": "data.status", "op": "eq", "value": 3}]}, "conditions.all[0].value"),
    ({"all": [{"field": "data.status.x", "op": "eq", "value": "a"}]}, "conditions.all[0].field"),
    ({"all": [], }, "conditions.all"),
    ({"all": [{"field": "data.status", "op": "eq"}], "any": []}, "conditions"),
    ({"all": [{"field": "data.status", "op": "eval", "value": "1"}]}, "conditions.all[0].op"),
])
def test_conditions_are_checked_against_the_events_fields(raw: Any, member: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        parse_conditions(raw, EventType.CALL_ENDED)
    assert member in (caught.value.details or {})["validation_errors"]


def test_a_valid_tree_parses_and_nests_three_deep() -> None:
    tree = parse_conditions({"all": [{"field": "data.duration_seconds", "op": "gte", "value": 30}, {"any": [
        {"field": "data.outcome", "op": "in", "value": ["booked", "interested"]},
        {"all": [{"field": "data.custom_data.crm_id", "op": "exists"}]}]}]}, EventType.CALL_ENDED)
    assert evaluate(tree, EventType.CALL_ENDED.example)[0] is True


@pytest.mark.parametrize("text", ["{{__class__}}", "{{data.id", "data.id}}", "{{ {{data.id}} }}",
                                  "{{data.id.__class__}}", "{{data.name|safe}}", "{%x%}{{}}", "x" * 10_001])
def test_hostile_templates_are_refused(text: str) -> None:
    with pytest.raises(ValidationFailed):
        check_template(text, EventType.LEAD_CREATED, "text", 10_000)


def test_templates_fill_members_by_substitution_only() -> None:
    data = {"name": "{{data.id}}", "id": 7, "custom_data": {"a": [1, 2]}, "email": None}
    assert render("{{data.name}}/{{ data.id }}/{{data.custom_data}}/{{data.email}}/{{data.nope}}", data) == (
        "{{data.id}}/7/{\"a\":[1,2]}//")
    assert render("{{__class__}} {{data.__init__.__globals__}}", data) == "{{__class__}} "


def _trigger(**kw: Any) -> Trigger:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Trigger(1, 1, "t", "call.ended", None, (), True, "s", now, now, **kw)


def test_the_loop_guard_skips_deep_events() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert decide(_trigger(), "call.ended", 1, {}, MAX_CHAIN_DEPTH - 1, now).status == "running"
    skipped = decide(_trigger(), "call.ended", 1, {}, MAX_CHAIN_DEPTH, now)
    assert skipped.status == "skipped" and not skipped.matched and skipped.reason


def test_retry_delays_grow_and_stop_after_five_attempts() -> None:
    assert [retry_delay(n, 0.0) for n in range(1, 6)] == [
        timedelta(seconds=5), timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2), None]
    low, high = retry_delay(1, -1.0), retry_delay(1, 1.0)
    assert low is not None and high is not None and timedelta(seconds=4) <= low <= high <= timedelta(seconds=6)


@settings(max_examples=examples(400))
@given(st.one_of(trees, st.none()), payloads)
def test_a_compiled_tree_decides_and_traces_as_the_tree_does(tree: Any, data: Any) -> None:
    matched, trace = _reference(tree, data)
    assert matcher(tree)(data) == (matched, tuple(trace))


def _reference(tree: Any, data: Any) -> tuple[bool, list[TraceStep]]:
    """The tree read node by node, with ``lookup`` and ``compare`` (what the compiled form must agree with)."""
    trace: list[TraceStep] = []

    def walk(node: Any) -> bool:
        if isinstance(node, Predicate):
            actual = lookup(data, node.field)
            result = compare(node.op, actual, node.value)
            trace.append(TraceStep(node.field, node.op, shown(node.value), shown(actual), result))
            return result
        results = [walk(item) for item in node.items]
        return all(results) if node.mode == "all" else any(results)

    return (True if tree is None else walk(tree)), trace


@settings(max_examples=examples(400))
@given(ops, json_values, json_values)
def test_the_written_out_comparisons_agree_with_compare(op: str, expected: Any, actual: Any) -> None:
    assert comparison(op, expected)(actual) == compare(op, actual, expected)


def _shown_as_before(value: Any) -> Any:
    """How a traced value always was shown: its JSON when at most 500 characters, else cut."""
    try:
        text = json.dumps(value, default=str, allow_nan=False)
    except (TypeError, ValueError):
        return str(value)[:200]
    return value if len(text) <= 500 else text[:500]


@given(st.one_of(json_values, st.text(max_size=600), st.text(st.characters(max_codepoint=127), max_size=600),
                 st.integers(-10**20, 10**20), st.floats()))
def test_a_traced_value_is_shown_as_before(value: Any) -> None:
    [step] = evaluate(Predicate("data.name", "eq", value), {"name": value})[1]
    assert step.actual == step.expected == _shown_as_before(value)

"""The small JSON Schema checker for tool arguments and analysis data: the keywords function-calling schemas use."""

from __future__ import annotations

from domain.json_schema import conforms, errors

ORDER = {"type": "object", "required": ["order_id"], "additionalProperties": False, "properties": {
    "order_id": {"type": "string", "pattern": "^[0-9]+$", "maxLength": 10},
    "quantity": {"type": "integer", "minimum": 1, "maximum": 9},
    "size": {"enum": ["s", "m", "l"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    "note": {"type": ["string", "null"]},
}}


def test_a_conforming_object_passes() -> None:
    assert errors({"order_id": "123", "quantity": 2, "size": "m", "tags": ["a"], "note": None}, ORDER) == []
    assert conforms({"order_id": "1", "quantity": 3.0}, ORDER)  # 3.0 is an integer in JSON


def test_each_broken_rule_is_named_by_its_place() -> None:
    found = errors({"order_id": "12a", "quantity": 0, "size": "xl", "tags": ["a", 2, "c"], "extra": 1}, ORDER)
    assert found == [
        "$.order_id: must match ^[0-9]+$",
        "$.quantity: must be at least 1",
        "$.size: must be one of 's', 'm', 'l'",
        "$.tags: must have at most 2 items",
        "$.tags[1]: must be string",
        "$.extra: is not an allowed property",
    ]
    assert errors({}, ORDER) == ["$.order_id: is required"]
    assert errors([], ORDER) == ["$: must be object"]
    assert errors({"order_id": "1", "quantity": True}, ORDER) == ["$.quantity: must be integer"]


def test_combinators_and_trivial_schemas() -> None:
    either = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert conforms("a", either) and conforms(3, either) and not conforms(1.5, either)
    assert errors(2, {"oneOf": [{"type": "integer"}, {"type": "number"}]}) == [
        "$: must match exactly one of its oneOf schemas"]
    assert conforms({"anything": [1]}, {}) and conforms(1, True) and not conforms(1, False)
    assert conforms("x", {"type": "string", "pattern": "(unclosed"})  # a pattern Python cannot read checks nothing
    assert conforms(5, {"type": "number", "exclusiveMinimum": 4}) and not conforms(4, {"exclusiveMinimum": 4})

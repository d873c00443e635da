"""A small JSON Schema checker for what a voice agent's model produces: a custom tool's arguments (checked against
the tool's ``parameters``) and the after-call analysis ``data`` (checked against the agent's ``analysis_schema``).

It covers the keywords function-calling schemas use: ``type`` (a name or a list), ``properties``, ``required``,
``additionalProperties`` (false or a schema), ``items``, ``enum``, ``const``, ``minLength``/``maxLength``,
``pattern``, ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``, ``minItems``/``maxItems``,
``anyOf``/``oneOf``/``allOf``. Keywords it does not know are ignored (as JSON Schema says of unknown keywords), so a
richer schema is checked on the keywords above only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
MAX_ERRORS = 10


def errors(instance: Any, schema: Any, path: str = "$") -> list[str]:
    """What is wrong with ``instance`` under ``schema``, one line each naming the place (``$.date``); empty when it
    conforms. A schema that is not an object (``true``, ``{}``) accepts everything; ``false`` accepts nothing."""
    found: list[str] = []
    _check(instance, schema, path, found)
    return found[:MAX_ERRORS]


def conforms(instance: Any, schema: Any) -> bool:
    return not errors(instance, schema)


def _check(value: Any, schema: Any, path: str, out: list[str]) -> None:
    if schema is False:
        out.append(f"{path}: not allowed")
        return
    if not isinstance(schema, dict) or len(out) >= MAX_ERRORS:
        return
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_TYPES.get(k, lambda _v: True)(value) for k in kinds if isinstance(k, str)):
            out.append(f"{path}: must be {' or '.join(str(k) for k in kinds)}")
            return
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        out.append(f"{path}: must be one of {', '.join(repr(v) for v in schema['enum'])}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: must be {schema['const']!r}")
    if isinstance(value, str):
        _string(value, schema, path, out)
    if _TYPES["number"](value):
        _number(value, schema, path, out)
    if isinstance(value, list):
        _array(value, schema, path, out)
    if isinstance(value, dict):
        _object(value, schema, path, out)
    for sub in schema.get("allOf") or []:
        _check(value, sub, path, out)
    for keyword, wanted in (("anyOf", None), ("oneOf", 1)):
        options = schema.get(keyword)
        if isinstance(options, list) and options:
            matching = sum(1 for option in options if not errors(value, option, path))
            if matching == 0 or (wanted is not None and matching != wanted):
                out.append(f"{path}: must match {'exactly one' if wanted else 'at least one'} of its {keyword} "
                           "schemas")


def _string(value: str, schema: dict[str, Any], path: str, out: list[str]) -> None:
    if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
        out.append(f"{path}: must be at least {schema['minLength']} characters")
    if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
        out.append(f"{path}: must be at most {schema['maxLength']} characters")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            if re.search(pattern, value) is None:
                out.append(f"{path}: must match {pattern}")
        except re.error:
            pass  # a pattern Python cannot read checks nothing


def _number(value: float, schema: dict[str, Any], path: str, out: list[str]) -> None:
    def bound(keyword: str, bad: Callable[[float, float], bool], words: str) -> None:
        limit = schema.get(keyword)
        if isinstance(limit, int | float) and not isinstance(limit, bool) and bad(value, limit):
            out.append(f"{path}: must be {words} {limit}")

    bound("minimum", lambda v, b: v < b, "at least")
    bound("maximum", lambda v, b: v > b, "at most")
    bound("exclusiveMinimum", lambda v, b: v <= b, "more than")
    bound("exclusiveMaximum", lambda v, b: v >= b, "less than")


def _array(value: list[Any], schema: dict[str, Any], path: str, out: list[str]) -> None:
    if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
        out.append(f"{path}: must have at least {schema['minItems']} items")
    if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
        out.append(f"{path}: must have at most {schema['maxItems']} items")
    items = schema.get("items")
    if isinstance(items, dict | bool):
        for index, item in enumerate(value):
            _check(item, items, f"{path}[{index}]", out)


def _object(value: dict[str, Any], schema: dict[str, Any], path: str, out: list[str]) -> None:
    for name in schema.get("required") or []:
        if isinstance(name, str) and name not in value:
            out.append(f"{path}.{name}: is required")
    declared = schema.get("properties")
    properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            _check(item, properties[name], f"{path}.{name}", out)
        elif extra is False:
            out.append(f"{path}.{name}: is not an allowed property")
        elif isinstance(extra, dict):
            _check(item, extra, f"{path}.{name}", out)

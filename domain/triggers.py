"""Triggers: automation rules that act when an event of the catalogue happens.

A trigger names one event (``domain.events.EventType``), an optional condition tree over the event's ``data``
and one to ten actions. Everything here is data and pure functions: the condition tree is parsed and checked
against the event's declared members (``EventType.fields``), evaluated without ever raising, and explained
(a trace of every comparison); action texts are templates with ``{{data.member}}`` placeholders, checked the
same way and filled by substitution only (no expression language, nothing is evaluated).

Standard library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

from domain.errors import ValidationFailed
from domain.events import CATALOGUE, EventType, FieldType
from domain.identity import persisted
from domain.metadata import KEY_MAX_LENGTH
from domain.text import ONE_LINE_WORDS, fold_line, is_one_line

MAX_DEPTH = 3
"""Condition groups nest at most this deep (the top group is depth 1)."""
MAX_PREDICATES = 50
MAX_IN_VALUES = 100
MAX_STRING_VALUE = 1000
MAX_ACTIONS = 10
MAX_ATTEMPTS = 5
"""An action is tried at most this many times."""
MAX_CHAIN_DEPTH = 3
"""An event caused by trigger actions this many levels deep (or more) is not evaluated (the loop guard)."""
NAME_MAX_LENGTH = 200
MAX_RUNS_PER_WINDOW = 100
RUN_RATE_WINDOW = timedelta(minutes=1)
"""The run-rate breaker: a trigger whose matched runs within one window (by the time of their events) would number
more than MAX_RUNS_PER_WINDOW is disabled (``disabled_reason`` RUN_RATE) and the run over the limit skipped."""
RUN_RATE = "run_rate"

OPS = ("eq", "neq", "gt", "gte", "lt", "lte", "in", "contains", "exists")
_ORDERING = frozenset({"gt", "gte", "lt", "lte"})
_OPS_BY_TYPE: Mapping[FieldType | None, frozenset[str]] = {
    FieldType.STRING: frozenset({"eq", "neq", "in", "contains", "exists"}),
    FieldType.NUMBER: frozenset({"eq", "neq", "gt", "gte", "lt", "lte", "in", "exists"}),
    FieldType.BOOLEAN: frozenset({"eq", "neq", "in", "exists"}),
    FieldType.OBJECT: frozenset({"exists"}),
    FieldType.ARRAY: frozenset({"contains", "exists"}),
    None: frozenset(OPS),  # below an object member: free-form, checked when evaluated
}
ACTION_TYPES = ("webhook", "email", "sms", "chat_message", "call", "campaign_contact")


class TriggerRunStatus(StrEnum):
    """The status of a trigger run."""

    NOT_MATCHED = "not_matched"
    SKIPPED = "skipped"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


RUN_STATUSES = tuple(TriggerRunStatus)


class TriggerActionStatus(StrEnum):
    """The status of one action of a trigger run."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRYING = "retrying"


ACTION_STATUSES = tuple(TriggerActionStatus)

RETRY_DELAYS: tuple[timedelta, ...] = (timedelta(seconds=5), timedelta(minutes=5), timedelta(minutes=30),
                                       timedelta(hours=2))
"""Waits before attempts 2 to 5 (like webhook deliveries), each with up to ±20 % jitter."""

_SEGMENT = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
_PATH = re.compile(rf"data(?:\.{_SEGMENT}){{1,4}}")
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


# -- conditions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Predicate:
    field: str
    """``data.member`` (or ``data.member.sub`` below an object member)."""
    op: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class Group:
    mode: str
    """``all`` or ``any``."""
    items: tuple[Condition, ...]


Condition = Predicate | Group


class TraceStep(NamedTuple):
    """One comparison of a decision. A tuple: a run's trace is stored as arrays ``[field, op, expected, actual,
    result]`` (thousands of runs a second are recorded), the API shows each as an object (``view``)."""

    field: str
    op: str
    expected: Any
    actual: Any
    result: bool

    def view(self) -> dict[str, Any]:
        return {"field": self.field, "op": self.op, "expected": self.expected, "actual": self.actual,
                "result": self.result}


def _fail(where: str, message: str) -> ValidationFailed:
    return ValidationFailed.field(where, message)


def _checked_path(path: object, where: str) -> str:
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise _fail(where, f"{str(path)[:80]!r} is not a field: write data.<member> (e.g. data.status)")
    return path


def field_type(event: EventType, path: str, where: str = "field") -> FieldType | None:
    """The declared type of ``path`` in ``event``'s data (None below an object member, where anything goes);
    ValidationFailed naming ``where`` when the event does not carry it."""
    parts = _checked_path(path, where).split(".")[1:]
    declared = event.fields.get(parts[0])
    if declared is None:
        raise _fail(where, f"{event.value} carries no field {path} (its fields: "
                           f"{', '.join('data.' + k for k in sorted(event.fields))})")
    if len(parts) == 1:
        return declared
    if declared is not FieldType.OBJECT:
        raise _fail(where, f"data.{parts[0]} is a {declared.value}: it has no member {parts[1]}")
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _scalar_fits(kind: FieldType | None, value: Any) -> bool:
    if value is None:
        return True
    if kind is FieldType.STRING:
        return isinstance(value, str) and len(value) <= MAX_STRING_VALUE
    if kind is FieldType.NUMBER:
        return _is_number(value)
    if kind is FieldType.BOOLEAN:
        return isinstance(value, bool)
    return (isinstance(value, str) and len(value) <= MAX_STRING_VALUE) or _is_number(value) or isinstance(
        value, bool)


def _check_value(kind: FieldType | None, op: str, value: Any, where: str) -> Any:
    type_name = kind.value if kind is not None else "value"
    if op == "exists":
        if value is None:
            return True
        if not isinstance(value, bool):
            raise _fail(where, "exists takes true (present and not null) or false")
        return value
    if op in _ORDERING:
        if not _is_number(value):
            raise _fail(where, f"{op} compares numbers: value must be a number")
        return value
    if op == "in":
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN_VALUES:
            raise _fail(where, f"in takes a list of 1 to {MAX_IN_VALUES} values")
        if not all(_scalar_fits(kind, v) for v in value):
            raise _fail(where, f"every value of in must be a {type_name}")
        return list(value)
    if op == "contains":
        if kind is FieldType.STRING and not (isinstance(value, str) and 0 < len(value) <= MAX_STRING_VALUE):
            raise _fail(where, "contains on a string takes a non-empty string")
        if not _scalar_fits(None, value) or value is None:
            raise _fail(where, "contains takes a string, number or boolean")
        return value
    if not _scalar_fits(kind, value):  # eq, neq
        raise _fail(where, f"value must be a {type_name} (or null)")
    return value


def parse_conditions(raw: Any, event: EventType, where: str = "conditions") -> Group | None:
    """The condition tree sent by a client (``{all|any: [...]}``, leaves ``{field, op, value}``), checked
    against ``event``'s declared data; None for no conditions (always matches). ValidationFailed names the
    offending member (``conditions.all[1].field``)."""
    if raw is None:
        return None
    count = [0]
    tree = _parse_node(raw, event, where, 1, count)
    if isinstance(tree, Predicate):
        return Group("all", (tree,))
    return tree


def _parse_node(raw: Any, event: EventType, where: str, depth: int, count: list[int]) -> Condition:
    if not isinstance(raw, Mapping):
        raise _fail(where, "a condition is an object: {all: [...]}, {any: [...]} or {field, op, value}")
    modes = [m for m in ("all", "any") if m in raw]
    if modes:
        if len(modes) > 1 or len(raw) != 1:
            raise _fail(where, "a group has exactly one member, all or any")
        mode = modes[0]
        if depth > MAX_DEPTH:
            raise _fail(where, f"groups nest at most {MAX_DEPTH} deep")
        items = raw[mode]
        if not isinstance(items, list) or not items:
            raise _fail(f"{where}.{mode}", "a non-empty list of conditions")
        return Group(mode, tuple(_parse_node(item, event, f"{where}.{mode}[{i}]", depth + 1, count)
                                 for i, item in enumerate(items)))
    unknown = set(raw) - {"field", "op", "value"}
    if unknown:
        raise _fail(where, f"unknown member {sorted(unknown)[0]!r} (a condition has field, op and value)")
    count[0] += 1
    if count[0] > MAX_PREDICATES:
        raise _fail(where, f"at most {MAX_PREDICATES} comparisons")
    path = _checked_path(raw.get("field"), f"{where}.field")
    kind = field_type(event, path, f"{where}.field")
    op = raw.get("op")
    if op not in OPS:
        raise _fail(f"{where}.op", f"one of {', '.join(OPS)}")
    if op not in _OPS_BY_TYPE[kind]:
        raise _fail(f"{where}.op", f"{op} does not apply to {path}, a {kind.value if kind else 'value'} "
                                   f"(use {', '.join(sorted(_OPS_BY_TYPE[kind]))})")
    return Predicate(path, op, _check_value(kind, op, raw.get("value"), f"{where}.value"))


def conditions_view(tree: Condition | None) -> dict[str, Any] | None:
    """The tree as the API shows it (and as it is stored)."""
    if tree is None:
        return None
    if isinstance(tree, Predicate):
        return {"field": tree.field, "op": tree.op, "value": tree.value}
    return {tree.mode: [conditions_view(item) for item in tree.items]}


def conditions_from_view(raw: Any) -> Group | None:
    """A stored tree back (it was checked when stored; nothing is re-validated)."""
    if raw is None:
        return None
    node = _from_view(raw)
    return node if isinstance(node, Group) else Group("all", (node,))


def _from_view(raw: Mapping[str, Any]) -> Condition:
    for mode in ("all", "any"):
        if mode in raw:
            return Group(mode, tuple(_from_view(item) for item in raw[mode]))
    return Predicate(raw["field"], raw["op"], raw.get("value"))


_MISSING = object()


def lookup(data: Any, path: str) -> Any:
    """The value at ``data.a.b`` in an event's data, or ``_MISSING``."""
    return _walk(data, tuple(path.split(".")))


def _walk(data: Any, parts: tuple[str, ...]) -> Any:
    """``lookup`` with the path split already."""
    value: Any = {"data": data}
    for part in parts:
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _same(a: Any, b: Any) -> bool:
    """Equality of JSON values where true is not 1 (Python's bool is an int)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    return type(a) is type(b) and a == b if not (a is None or b is None) else a is b


def compare(op: str, actual: Any, expected: Any) -> bool:
    """One comparison; never raises. A missing member equals nothing (``eq`` false, ``neq`` true)."""
    try:
        if op == "exists":
            present = actual is not _MISSING and actual is not None
            return present if expected is not False else not present
        if op == "eq":
            return actual is not _MISSING and _same(actual, expected)
        if op == "neq":
            return not (actual is not _MISSING and _same(actual, expected))
        if op == "in":
            return actual is not _MISSING and isinstance(expected, list) and any(_same(actual, e) for e in expected)
        if op == "contains":
            if isinstance(actual, str) and isinstance(expected, str):
                return expected in actual
            if isinstance(actual, list):
                return any(_same(item, expected) for item in actual)
            return False
        if op in _ORDERING:
            if not (_is_number(actual) and _is_number(expected)):
                return False
            return bool({"gt": actual > expected, "gte": actual >= expected, "lt": actual < expected,
                         "lte": actual <= expected}[op])
    except Exception:
        return False
    return False


def _shown(value: Any) -> Any:
    """A value as the trace shows it: JSON-safe and short (at most 500 characters of JSON, else its JSON cut)."""
    if value is _MISSING:
        return None
    kind = type(value)
    # the common scalars without encoding them: a string of 41 characters is at most 494 characters of JSON
    # (a character outside the BMP is a 12-character escape), an ASCII one of 83 at most 500 (6-character escapes)
    if kind is str and (len(value) <= 41 or (len(value) <= 83 and value.isascii())):
        return value
    if value is None or kind is bool or (kind is int and -10**15 < value < 10**15) or (
            kind is float and math.isfinite(value)):
        return value
    try:
        text = json.dumps(value, default=str, allow_nan=False)
    except (TypeError, ValueError):
        return str(value)[:200]
    return value if len(text) <= 500 else text[:500]


def evaluate(tree: Condition | None, data: Any) -> tuple[bool, list[TraceStep]]:
    """Whether ``data`` (an event's data: any JSON value) satisfies ``tree``, with the trace of every
    comparison made (each one is made, so the trace explains the whole decision). Never raises. For one event;
    ``matcher`` compiles a tree once for many."""
    matched, trace = matcher(tree)(data)
    return matched, list(trace)


Matcher = Callable[[Any], tuple[bool, tuple[TraceStep, ...]]]
"""A condition tree made ready to run: ``evaluate`` as one function of the event's data (see ``matcher``)."""


def matcher(tree: Condition | None) -> Matcher:
    """``tree`` compiled once into nested closures (paths split, operators and the traced form of each expected
    value chosen ahead), for evaluating it against many events: the same result and trace as ``evaluate``."""
    if tree is None:
        return _always
    check = _compiled(tree)

    def match(data: Any) -> tuple[bool, tuple[TraceStep, ...]]:
        trace: list[TraceStep] = []
        return check(data, trace), tuple(trace)

    return match


def _always(data: Any) -> tuple[bool, tuple[TraceStep, ...]]:
    return True, ()


_Check = Callable[[Any, list[TraceStep]], bool]


def _compiled(node: Condition) -> _Check:
    if isinstance(node, Predicate):
        return _compiled_predicate(node)
    items = tuple(_compiled(item) for item in node.items)
    if node.mode == "all":
        def every(data: Any, trace: list[TraceStep]) -> bool:
            results = [item(data, trace) for item in items]  # every comparison is made (and traced)
            return all(results)
        return every

    def some(data: Any, trace: list[TraceStep]) -> bool:
        results = [item(data, trace) for item in items]
        return any(results)
    return some


def _compiled_predicate(node: Predicate) -> _Check:
    name, op, expected = node.field, node.op, node.value
    shown = _shown(expected)
    path = tuple(name.split("."))
    test = comparison(op, expected)

    def check(data: Any, trace: list[TraceStep]) -> bool:
        actual = _walk(data, path)
        result = test(actual)
        trace.append(TraceStep(name, op, shown, _shown(actual), result))
        return result

    return check


def comparison(op: str, expected: Any) -> Callable[[Any], bool]:
    """``compare(op, actual, expected)`` as a function of ``actual``: the common cases written out (the same
    results: a string equals only a string, a missing member equals nothing), the others through ``compare``."""
    if op == "exists":
        if expected is False:
            return lambda actual: actual is _MISSING or actual is None
        return lambda actual: actual is not _MISSING and actual is not None
    if type(expected) is str and op == "eq":
        return lambda actual: type(actual) is str and actual == expected
    if type(expected) is str and op == "neq":
        return lambda actual: not (type(actual) is str and actual == expected)
    return lambda actual: compare(op, actual, expected)


# -- templates ---------------------------------------------------------------------------------


def check_template(text: Any, event: EventType, where: str, max_length: int) -> str:
    """A text with ``{{data.member}}`` placeholders: every ``{{`` must open a placeholder naming a member the
    event carries, and braces must balance; ValidationFailed naming ``where`` otherwise."""
    if not isinstance(text, str):
        raise _fail(where, "must be a string")
    if len(text) > max_length:
        raise _fail(where, f"at most {max_length} characters")
    rest = _PLACEHOLDER.sub(lambda m: _check_placeholder(m.group(1), event, where), text)
    if "{{" in rest or "}}" in rest:
        raise _fail(where, "unbalanced braces: a placeholder is {{data.member}}")
    return text


def _check_placeholder(inner: str, event: EventType, where: str) -> str:
    if not _PATH.fullmatch(inner):
        raise _fail(where, f"{{{{{inner[:60]}}}}} is not a placeholder: write {{{{data.member}}}}")
    field_type(event, inner, where)
    return ""


def placeholders(text: str) -> list[str]:
    return [m.group(1) for m in _PLACEHOLDER.finditer(text)]


def render(text: str, data: Any, *, max_length: int = 100_000) -> str:
    """``text`` with each ``{{data.member}}`` replaced by that member of ``data`` (strings as they are, other
    values as JSON, a missing or null member as nothing). Anything else is left as written. Never raises."""

    def fill(match: re.Match[str]) -> str:
        path = match.group(1)
        if not _PATH.fullmatch(path):
            return match.group(0)
        value = lookup(data, path)
        if value is _MISSING or value is None:
            return ""
        if isinstance(value, str):
            return value
        try:
            return json.dumps(value, default=str, separators=(",", ":"))
        except (TypeError, ValueError):
            return str(value)

    try:
        return _PLACEHOLDER.sub(fill, text)[:max_length]
    except Exception:
        return text[:max_length]


# -- actions -----------------------------------------------------------------------------------

SUBJECT_MAX = 200
BODY_MAX = 10_000
SMS_MAX = 1600
CHAT_MAX = 4000
PHONE_MAX = 100
NAME_MAX = 200
MAX_RECIPIENTS = 10
MAX_CUSTOM_FIELDS = 20
_EMAIL = re.compile(r"[^@\s{}]+@[^@\s{}]+\.[^@\s{}]+")
_CONFIG_MEMBERS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    "webhook": (frozenset({"url"}), frozenset()),
    "email": (frozenset({"to", "subject", "body"}), frozenset()),
    "sms": (frozenset({"to", "body"}), frozenset()),
    "chat_message": (frozenset({"url", "text"}), frozenset()),
    "call": (frozenset({"agent_id", "phone"}), frozenset({"custom_data"})),
    "campaign_contact": (frozenset({"campaign_id", "phone"}), frozenset({"name"})),
}
"""Required and optional members of each action type's config."""


@dataclass(frozen=True, slots=True)
class Action:
    type: str
    config: Mapping[str, Any]

    def view(self) -> dict[str, Any]:
        return {"type": self.type, "config": dict(self.config)}


def check_action(raw: Any, event: EventType, where: str) -> Action:
    """One action as a client sent it: its type, its config's members, its texts checked as templates against
    ``event``. URLs and literal phone numbers are checked by the application (egress rules, the normaliser)."""
    if not isinstance(raw, Mapping):
        raise _fail(where, "an action is {type, config}")
    kind = raw.get("type")
    if kind not in ACTION_TYPES:
        raise _fail(f"{where}.type", f"one of {', '.join(ACTION_TYPES)}")
    config = raw.get("config")
    if not isinstance(config, Mapping):
        raise _fail(f"{where}.config", "an object")
    required, optional = _CONFIG_MEMBERS[kind]
    for name in sorted(required - set(config)):
        raise _fail(f"{where}.config.{name}", "required")
    for name in sorted(set(config) - required - optional):
        raise _fail(f"{where}.config.{name}", f"unknown member for a {kind} action")
    at = f"{where}.config"
    out: dict[str, Any] = {}
    if kind in ("webhook", "chat_message"):
        if not isinstance(config["url"], str) or not 0 < len(config["url"]) <= 2048:
            raise _fail(f"{at}.url", "a URL of at most 2048 characters")
        out["url"] = config["url"].strip()
        if kind == "chat_message":
            out["text"] = check_template(config["text"], event, f"{at}.text", CHAT_MAX)
    elif kind == "email":
        to = config["to"]
        if not isinstance(to, list) or not 1 <= len(to) <= MAX_RECIPIENTS:
            raise _fail(f"{at}.to", f"a list of 1 to {MAX_RECIPIENTS} addresses")
        for i, address in enumerate(to):
            if not isinstance(address, str) or len(address) > 320 or not _EMAIL.fullmatch(address.strip()):
                raise _fail(f"{at}.to[{i}]", "not an email address")
        out["to"] = [a.strip() for a in to]
        out["subject"] = check_template(config["subject"], event, f"{at}.subject", SUBJECT_MAX)
        if not is_one_line(out["subject"]):
            raise _fail(f"{at}.subject", ONE_LINE_WORDS)
        out["body"] = check_template(config["body"], event, f"{at}.body", BODY_MAX)
    elif kind == "sms":
        out["to"] = check_template(config["to"], event, f"{at}.to", PHONE_MAX)
        out["body"] = check_template(config["body"], event, f"{at}.body", SMS_MAX)
    elif kind == "call":
        out["agent_id"] = _check_id(config["agent_id"], f"{at}.agent_id")
        out["phone"] = check_template(config["phone"], event, f"{at}.phone", PHONE_MAX)
        custom = config.get("custom_data") or {}
        if not isinstance(custom, Mapping) or len(custom) > MAX_CUSTOM_FIELDS:
            raise _fail(f"{at}.custom_data", f"an object of at most {MAX_CUSTOM_FIELDS} members")
        if any(len(str(k)) > KEY_MAX_LENGTH for k in custom):  # as every call's custom_data: a placeholder's name
            raise _fail(f"{at}.custom_data", f"keys must be at most {KEY_MAX_LENGTH} characters")
        out["custom_data"] = {str(k): check_template(v, event, f"{at}.custom_data.{k}", 1000)
                              for k, v in custom.items()}
    else:  # campaign_contact
        out["campaign_id"] = _check_id(config["campaign_id"], f"{at}.campaign_id")
        out["phone"] = check_template(config["phone"], event, f"{at}.phone", PHONE_MAX)
        if config.get("name") is not None:
            out["name"] = check_template(config["name"], event, f"{at}.name", NAME_MAX)
            if not is_one_line(out["name"]):
                raise _fail(f"{at}.name", ONE_LINE_WORDS)
    return Action(kind, out)


def _check_id(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 2**53:
        raise _fail(where, "a positive integer id")
    return value


def check_actions(raw: Any, event: EventType, where: str = "actions") -> tuple[Action, ...]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_ACTIONS:
        raise _fail(where, f"a list of 1 to {MAX_ACTIONS} actions")
    return tuple(check_action(item, event, f"{where}[{i}]") for i, item in enumerate(raw))


def check_event(name: Any, where: str = "event") -> EventType:
    kind = CATALOGUE.get(name) if isinstance(name, str) else None
    if kind is None or not kind.emitted:
        raise _fail(where, f"{str(name)[:100]!r} is not an event of the catalogue (GET /webhooks/events)")
    return kind


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX_LENGTH:
        raise _fail("name", f"1 to {NAME_MAX_LENGTH} characters")
    if not is_one_line(name):
        raise _fail("name", ONE_LINE_WORDS)
    return name.strip()


ONE_LINE_MEMBERS = frozenset({"subject", "phone", "name", "to"})
"""Config members that are one line (a mail subject, a number, a name): what fills them is folded to one line."""


def rendered(action: Action, data: Any) -> dict[str, Any]:
    """The action's config with every text filled from ``data``; a one-line member's control characters (CR, LF,
    tab...) become spaces, so event data never adds a line (a mail header) to what is sent."""
    config = dict(action.config)
    keys = ("text", "subject", "body", "phone", "name", "to") if action.type == "sms" else (
        "text", "subject", "body", "phone", "name")
    for key in keys:
        if isinstance(config.get(key), str):
            filled = render(config[key], data)
            config[key] = fold_line(filled) if key in ONE_LINE_MEMBERS else filled
    if action.type == "call":
        config["custom_data"] = {k: render(v, data) for k, v in (config.get("custom_data") or {}).items()}
    return config


def retry_delay(attempts: int, jitter: float) -> timedelta | None:
    """The wait after ``attempts`` failed attempts (``jitter`` in [-1, 1]); None: no attempt left."""
    if attempts >= MAX_ATTEMPTS:
        return None
    base = RETRY_DELAYS[min(attempts, len(RETRY_DELAYS)) - 1]
    return base * (1 + 0.2 * max(-1.0, min(1.0, jitter)))


# -- the resources ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trigger:
    id: int | None
    organization_id: int
    name: str
    event: str
    conditions: Group | None
    actions: tuple[Action, ...]
    enabled: bool
    sealed_secret: str
    created_at: datetime
    updated_at: datetime
    disabled_reason: str | None = None
    """Why Parley disabled it (``run_rate``: the run-rate breaker); None when enabled or disabled by its owner."""


@dataclass(frozen=True, slots=True)
class ActionResult:
    type: str
    status: str = TriggerActionStatus.PENDING
    attempts: int = 0
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    next_attempt_at: datetime | None = None

    def view(self) -> dict[str, Any]:
        return {"type": self.type, "status": self.status, "attempts": self.attempts, "error": self.error,
                "started_at": self.started_at, "finished_at": self.finished_at,
                "next_attempt_at": self.next_attempt_at}


@dataclass(frozen=True, slots=True)
class TriggerRun:
    id: int | None
    organization_id: int
    trigger_id: int
    event: str
    event_id: int | None
    """The outbox event evaluated (None for a test run, which is never stored)."""
    depth: int
    matched: bool
    status: str
    condition_trace: tuple[TraceStep, ...]
    actions: tuple[ActionResult, ...]
    data: Mapping[str, Any] = field(default_factory=dict)
    """The event's data, kept for a matched run (the actions' templates are filled from it)."""
    reason: str | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None
    event_at: datetime | None = None
    """When the event happened (the outbox's time of it; None for runs stored before it was kept)."""


def braked(run: TriggerRun, now: datetime) -> TriggerRun:
    """A matched run over the run-rate limit: skipped, nothing done."""
    return replace(run, matched=False, status=TriggerRunStatus.SKIPPED, actions=(), data={}, finished_at=now, reason=(
        f"the trigger ran more than {MAX_RUNS_PER_WINDOW} times in "
        f"{int(RUN_RATE_WINDOW.total_seconds())} seconds and was disabled ({RUN_RATE})"))


def decide(trigger: Trigger, event: str, event_id: int | None, data: Mapping[str, Any], depth: int,
           now: datetime, match: Matcher | None = None, event_at: datetime | None = None) -> TriggerRun:
    """The run of ``trigger`` for one event: skipped past the loop guard, else matched (its actions pending)
    or not, with the condition trace. ``match``: the trigger's conditions compiled once (``matcher``) when many
    events are decided. ``event_at``: when the event happened (else ``now``)."""
    at = event_at or now
    trigger_id = persisted(trigger.id)
    if depth >= MAX_CHAIN_DEPTH:
        return TriggerRun(None, trigger.organization_id, trigger_id, event, event_id, depth, False,
                          TriggerRunStatus.SKIPPED, (), (), {}, f"the event was caused by trigger actions {depth} "
                          f"levels deep (at most {MAX_CHAIN_DEPTH - 1} are followed)", now, now, at)
    matched, trace = (match or matcher(trigger.conditions))(data)
    if not matched:
        return TriggerRun(None, trigger.organization_id, trigger_id, event, event_id, depth, False,
                          TriggerRunStatus.NOT_MATCHED, trace, (), {}, None, now, now, at)
    return TriggerRun(None, trigger.organization_id, trigger_id, event, event_id, depth, True,
                      TriggerRunStatus.RUNNING, trace, tuple(ActionResult(a.type) for a in trigger.actions), dict(data),
                      None, now, None, at)


def settle(run: TriggerRun, now: datetime) -> TriggerRun:
    """The run's status from its actions: failed once one failed for good, succeeded when all did."""
    statuses = {a.status for a in run.actions}
    if TriggerActionStatus.FAILED in statuses:
        return _with_status(run, TriggerRunStatus.FAILED, now)
    if statuses == {TriggerActionStatus.SUCCEEDED}:
        return _with_status(run, TriggerRunStatus.SUCCEEDED, now)
    return run


def _with_status(run: TriggerRun, status: TriggerRunStatus, now: datetime) -> TriggerRun:
    return replace(run, status=status, finished_at=run.finished_at or now)


def sample_data(event: EventType) -> dict[str, Any]:
    return dict(event.example)


def is_literal(text: str) -> bool:
    """True when ``text`` has no placeholder (a literal the application can check at creation)."""
    return not placeholders(text)


def trace_from_view(raw: Sequence[Any]) -> tuple[TraceStep, ...]:
    """A stored trace back: each step an array ``[field, op, expected, actual, result]`` (the compact form runs are
    stored in) or an object ``{field, op, expected, actual, result}`` (as the API shows it; runs stored before)."""
    return tuple(TraceStep(s[0], s[1], s[2], s[3], bool(s[4])) if isinstance(s, list | tuple) else
                 TraceStep(s["field"], s["op"], s.get("expected"), s.get("actual"), bool(s["result"])) for s in raw)

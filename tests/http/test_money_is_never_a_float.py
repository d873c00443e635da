"""Money is integer cents everywhere: every amount-like field of every msgspec schema the API uses, of the OpenAPI
document it serves, of the billing domain and of every SQL column is an integer, never a float."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import typing
from typing import Any

import msgspec
import sqlalchemy as sa

import domain.billing
import entrypoints.http.schemas
from adapters.sql.metadata import metadata
from adapters.sql.schema import load_all_tables
from tests.support.apps import Api

MONEY = re.compile(r"(^|_)(amount|price|subtotal|cents|cost|fee|balance|charge|tax|discount)(_|$)|^total$")
"""Field names that hold money (``total`` alone is an invoice's total; list counts are under ``meta``)."""


def _is_money(name: str) -> bool:
    return bool(MONEY.search(name))


def _integer_only(info: msgspec.inspect.Type) -> bool:
    """An int (maybe optional, maybe constrained); never a float or a union with one."""
    if isinstance(info, msgspec.inspect.Metadata):
        return _integer_only(info.type)
    if isinstance(info, msgspec.inspect.UnionType):
        return all(_integer_only(t) for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
    return isinstance(info, msgspec.inspect.IntType)


def _structs() -> list[type[msgspec.Struct]]:
    found: list[type[msgspec.Struct]] = []
    for info in pkgutil.iter_modules(entrypoints.http.schemas.__path__):
        module = importlib.import_module(f"entrypoints.http.schemas.{info.name}")
        found += [v for v in vars(module).values()
                  if isinstance(v, type) and issubclass(v, msgspec.Struct) and v is not msgspec.Struct
                  and not getattr(v, "__parameters__", ())]
    return found


def test_every_amount_in_every_msgspec_schema_is_an_integer() -> None:
    checked, floats = [], []
    for struct in _structs():
        for field in msgspec.inspect.type_info(struct).fields:  # type: ignore[attr-defined]
            if _is_money(field.name):
                checked.append(f"{struct.__name__}.{field.name}")
                if not _integer_only(field.type):
                    floats.append(f"{struct.__name__}.{field.name}: {field.type}")
    assert not floats, floats
    assert {"InvoiceOut.total", "InvoiceOut.subtotal", "InvoiceLineOut.amount",
            "InvoiceLineOut.unit_amount"} <= set(checked)


def _properties(node: Any, path: str = "") -> typing.Iterator[tuple[str, str, Any]]:
    if isinstance(node, dict):
        for name, schema in (node.get("properties") or {}).items():
            yield path, name, schema
        for key, value in node.items():
            yield from _properties(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _properties(value, f"{path}/{i}")


def _types(schema: dict[str, Any], components: dict[str, Any]) -> set[str]:
    if "$ref" in schema:
        return _types(components[schema["$ref"].rsplit("/", 1)[1]], components)
    found: set[str] = set()
    kind = schema.get("type")
    if isinstance(kind, list):
        found |= set(kind)
    elif kind is not None:
        found.add(kind)
    for option in schema.get("oneOf", []) + schema.get("anyOf", []):
        found |= _types(option, components)
    return found


async def test_every_amount_in_the_openapi_document_is_an_integer(api: Api) -> None:
    document = (await api.client.get("/v2/openapi.json")).json()
    components = document["components"]["schemas"]
    checked, floats = [], []
    for where, name, schema in _properties(document):
        if _is_money(name):
            types = _types(schema, components) - {"null"}
            checked.append(name)
            if types != {"integer"}:
                floats.append(f"{where}.{name}: {sorted(types)}")
    assert not floats, floats
    assert {"total", "subtotal", "amount", "unit_amount"} <= set(checked)


def test_every_amount_column_and_domain_field_is_an_integer() -> None:
    load_all_tables()
    columns = [(t.name, c) for t in metadata.tables.values() for c in t.columns if _is_money(c.name)]
    assert {"billing_invoices.total", "billing_invoices.subtotal"} <= {f"{t}.{c.name}" for t, c in columns}
    floats = [f"{t}.{c.name}: {c.type}" for t, c in columns if not isinstance(c.type, sa.Integer)]
    assert not floats, floats
    for cls in (domain.billing.Invoice, domain.billing.InvoiceLine):
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            if _is_money(field.name):
                assert hints[field.name] is int, (cls.__name__, field.name, hints[field.name])
    assert all(isinstance(price, int) for price in domain.billing.PLAN_PRICES.values())
    assert isinstance(domain.billing.CALL_MINUTE_OVERAGE, int) and isinstance(domain.billing.SMS_SEGMENT_OVERAGE, int)

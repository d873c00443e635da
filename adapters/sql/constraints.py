"""Which broken database constraint means which domain error: one table for every SQL repository.

A repository wraps a write in ``with constraint_errors():``; an ``IntegrityError`` whose constraint is listed
here becomes that domain error, any other one propagates unchanged. PostgreSQL names the constraint; SQLite
names only the columns of a unique constraint or index (``UNIQUE constraint failed: t.a, t.b``), so each
entry's columns are read from the table metadata and matched as well.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.schema import ColumnCollectionConstraint

from adapters.sql.knowledge_tables import documents
from adapters.sql.scheduling_tables import ACTIVE_SLOT_INDEX, appointments
from adapters.sql.webhooks_tables import webhook_deliveries
from domain.errors import Conflict, DomainError, DuplicateDocument, SlotUnavailable


def _duplicate_document() -> DomainError:
    return DuplicateDocument("the document is already in this knowledge base")


def _slot_taken() -> DomainError:
    return SlotUnavailable("slot_start is already held by another appointment of this calendar")


def _delivery_exists() -> DomainError:
    return Conflict("this delivery exists already")


# constraint or unique index name -> (its table, the domain error it means)
CONSTRAINT_ERRORS: dict[str, tuple[sa.Table, Callable[[], DomainError]]] = {
    "uq_documents_knowledge_base_id_content_hash": (documents, _duplicate_document),
    "uq_documents_knowledge_base_id_source_url": (documents, _duplicate_document),
    ACTIVE_SLOT_INDEX: (appointments, _slot_taken),
    "uq_webhook_deliveries_event_id_subscription_id": (webhook_deliveries, _delivery_exists),
    "uq_webhook_deliveries_webhook_id": (webhook_deliveries, _delivery_exists),
}

_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: ([\w., ]+)")


def _columns(table: sa.Table, name: str) -> tuple[str, ...]:
    items: list[ColumnCollectionConstraint | sa.Index] = [
        *(c for c in table.constraints if isinstance(c, ColumnCollectionConstraint)), *table.indexes]
    for item in items:
        if item.name == name:
            return tuple(f"{table.name}.{column.name}" for column in item.columns)
    raise LookupError(f"{table.name} has no constraint or index {name}")


_BY_COLUMNS = {_columns(table, name): name for name, (table, _) in CONSTRAINT_ERRORS.items()}


def violated_constraint(error: IntegrityError) -> str | None:
    """The name of the constraint ``error`` broke, when the database says (PostgreSQL) or its columns tell
    (SQLite, listed constraints only)."""
    for candidate in (error.orig, getattr(error.orig, "__cause__", None)):
        name = getattr(candidate, "constraint_name", None)
        if name:
            return str(name)
    found = _SQLITE_UNIQUE.search(str(error.orig))
    if found:
        return _BY_COLUMNS.get(tuple(part.strip() for part in found.group(1).split(",")))
    return None


def domain_error(error: IntegrityError) -> DomainError | None:
    """The domain error a broken constraint means, None when the table does not list it."""
    entry = CONSTRAINT_ERRORS.get(violated_constraint(error) or "")
    return entry[1]() if entry else None


@contextmanager
def constraint_errors() -> Iterator[None]:
    """Turns an ``IntegrityError`` of a listed constraint into its domain error."""
    try:
        yield
    except IntegrityError as exc:
        mapped = domain_error(exc)
        if mapped is None:
            raise
        raise mapped from None

"""Which statements of a read-only unit of work may run outside a transaction: plain reads.

A unit of work that only reads (an HTTP GET) gains nothing from ``BEGIN`` and ``COMMIT`` around its
statements: on PostgreSQL every statement under READ COMMITTED takes its own snapshot anyway, and on SQLite
each statement outside a transaction reads one consistent snapshot of its own. Both drivers
(``sqlite_driver.py``, ``postgres_driver.py``) therefore send a read unit's plain reads without opening a
transaction, and open it, lazily, with the first statement that is anything else: a write, a locking read
(``FOR UPDATE``/``FOR SHARE``), or a call of a function with effects (advisory locks, sequences, settings,
notifications). What follows runs in that transaction as before, so a read unit that writes is still atomic.

The test is on the SQL text the dialect compiled, so it holds for SQLAlchemy constructs and ``text()`` alike;
it errs on the side of a transaction (a statement it does not recognise as plain opens one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.engine import Dialect

_NOT_PLAIN = re.compile(
    r"\bFOR\s+(?:NO\s+KEY\s+UPDATE|UPDATE|KEY\s+SHARE|SHARE)\b"  # a locking read
    r"|\bINTO\b"  # SELECT ... INTO creates a table
    r"|\b(?:pg_advisory\w*|pg_try_advisory\w*|nextval|setval|currval|lastval|set_config|pg_notify"
    r"|txid_current\w*|pg_current_xact_id\w*|pg_sleep\w*)\s*\(",
    re.IGNORECASE,
)
_KNOWN: dict[str, bool] = {}
_KNOWN_MAX = 4096  # statements are compiled from a bounded set of shapes; forget them all should that grow


def plain_read(sql: str) -> bool:
    """True when ``sql`` is a SELECT that neither locks nor calls anything with an effect."""
    known = _KNOWN.get(sql)
    if known is None:
        known = sql.lstrip()[:6].upper() == "SELECT" and _NOT_PLAIN.search(sql) is None
        if len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.clear()
        _KNOWN[sql] = known
    return known


class DriverRead:
    """A plain read built with SQLAlchemy Core that a read-only unit of work runs on the driver's own connection
    (``SqlUnitOfWork.driver_rows``): the statement is compiled once per dialect, its values are put in the
    compiled order (through their types' bind processors, where a type has one), and the rows come back as the
    driver returns them, with none of SQLAlchemy's execution, result or type processing. That is most of the
    cost of a GET that reads one page; the list of agents spends a quarter of its CPU less.

    Its columns should need nothing from SQLAlchemy on the way out: text, numbers, and on PostgreSQL what
    asyncpg decodes itself (``timestamptz`` to aware UTC datetimes, ``jsonb`` through the connection's codec).
    A unit that may write runs the same statement through SQLAlchemy, whose answer for such columns is the same.
    """

    __slots__ = ("_compiled", "statement")

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        self._compiled: dict[str, tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]]]] = {}

    def compiled(self, dialect: Dialect) -> tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]]]:
        """(the SQL, a function from the statement's named values to the driver's positional ones)."""
        known = self._compiled.get(dialect.name)
        if known is None:
            known = self._compiled[dialect.name] = self._compile(dialect)
        return known

    def _compile(self, dialect: Dialect) -> tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]]]:
        compiled = self.statement.compile(dialect=dialect)
        sql = compiled.string
        if not plain_read(sql):
            raise ValueError(f"not a plain read: {sql}")
        if compiled.literal_execute_params or compiled.post_compile_params or compiled.positiontup is None:
            raise ValueError(f"a driver read binds plain positional values only: {sql}")
        sources: list[tuple[str | None, Any, Callable[[Any], Any] | None]] = []
        for name in compiled.positiontup:
            bind = compiled.binds[name]
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            # a value the statement carries (a literal) or one the caller names
            sources.append((bind.key, None, process) if bind.required else (None, bind.effective_value, process))

        def values(named: Mapping[str, Any]) -> tuple[Any, ...]:
            out = []
            for key, fixed, process in sources:
                value = named[key] if key is not None else fixed
                out.append(value if process is None else process(value))
            return tuple(out)

        return sql, values

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

"""Whether an exception means the database cannot be reached now (an outage), rather than a fault of the code.

The HTTP side answers such a failure with 503 ``service_unavailable`` and ``Retry-After`` (the client may try
again; nothing was done, the request's transaction being rolled back), never with a 500.
"""

from __future__ import annotations

import socket

from asyncpg.exceptions import InsufficientResourcesError, OperatorInterventionError, PostgresConnectionError
from asyncpg.exceptions import InterfaceError as DriverInterfaceError
from sqlalchemy import exc as sa_exc

RETRY_AFTER_SECONDS = 5

_UNREACHABLE = (
    ConnectionError,  # refused, reset, aborted
    TimeoutError,  # a connect or a statement that timed out
    socket.gaierror,  # the database's host name does not resolve
    PostgresConnectionError,  # asyncpg: the server closed the connection, or refuses new ones now
    DriverInterfaceError,  # asyncpg: the connection is closed or in an unusable state
    # PostgreSQL refusing for now: too many connections (53300, max_connections or a role's or database's limit),
    # out of memory or disk (class 53); starting up, shutting down, a statement timeout (class 57)
    InsufficientResourcesError,
    OperatorInterventionError,
    sa_exc.OperationalError,  # the driver's word for "the database cannot do it now" (gone, locked, starting)
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,  # the pool found no connection in time
)


def is_database_outage(error: BaseException) -> bool:
    """True when ``error``, or an exception it was raised from, says the database cannot be reached now."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _UNREACHABLE):
            return True
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        current = current.__cause__ or current.__context__
    return False

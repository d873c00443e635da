"""Small runtime values shared by the composition root and the entrypoints."""

from __future__ import annotations

import contextvars
import logging
import os
import socket
from dataclasses import dataclass
from typing import TextIO

from application.jobs import JobWakeUps
from application.ports.platform import Random
from application.principals import Principal, PrincipalKind
from domain.rate_limit import Window
from domain.widget import REQUESTS_PER_MINUTE

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


JOB_WAKE_UPS = JobWakeUps()
"""The process's in-process wake-up: every unit of work that created background work notifies it after commit;
every job runner of the process (the in-process worker of `parley serve`, `parley worker`) waits on it."""


def owner_name(random: Random) -> str:
    """This process's name as the owner of the leases it takes (jobs, webhook deliveries): host, pid, a random tag."""
    return f"{socket.gethostname()[:32]}:{os.getpid()}:{random.hex(4)}"


@dataclass(frozen=True, slots=True)
class TransactionMode:
    """Write transactions take the database's write lock up front (SQLite: BEGIN IMMEDIATE)."""

    write: bool = True


@dataclass(frozen=True, slots=True)
class RateLimitPolicy:
    windows: tuple[Window, ...]
    """An API key's (and a session's) windows."""
    widget: tuple[Window, ...] = (Window(60, REQUESTS_PER_MINUTE),)
    """A widget token's: its own bucket, never its minting key's."""
    organization: tuple[Window, ...] = ()
    """The ceiling of all the keys of one organization together (bucket ``org:<id>``); empty: none."""

    def windows_for(self, principal: Principal) -> tuple[Window, ...]:
        return self.widget if principal.kind is PrincipalKind.WIDGET else self.windows


@dataclass(frozen=True, slots=True)
class AuthFailurePolicy:
    """Failed authentications allowed per client address (bucket ``authfail:<address>``)."""

    windows: tuple[Window, ...]


QUIET_LOGGERS = ("httpx", "httpcore")


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get()
        return True


def tune_gc(threshold: int) -> None:
    """A long-running process's garbage collector: a young-generation pass every ``threshold`` allocations (the
    older generations keep Python's ratios). Python's 700 made a read of 25 agents pay about a fifth of its CPU
    for passes over objects that reference counting frees anyway (docs/performance.md)."""
    import gc

    gc.set_threshold(threshold, *gc.get_threshold()[1:])


def configure_logging(level: str, fmt: str = "json", stream: TextIO | None = None) -> None:
    """stderr (or ``stream``) at ``level``: one JSON object per line (``fmt="json"``) or a readable line
    (``"console"``), secrets redacted either way (entrypoints/observability.py)."""
    from entrypoints.observability import ConsoleFormatter, JsonFormatter

    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else ConsoleFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # the HTTP client logs every request at INFO (each webhook delivery, each page fetched):
    # Parley logs what matters itself (a WARNING per failed delivery attempt)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))

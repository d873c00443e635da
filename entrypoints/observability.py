"""Logs and metrics of a Parley process.

Logs: one JSON object per line (``PARLEY_LOG_FORMAT=json``, the default; ``console`` for a readable line),
every line with the request id of the request it belongs to; a request line (``parley.http.request``) per
request and a job line (``parley.jobs``) per job run carry their fields as keys. The formatter redacts the
known shapes of secrets (API keys, bearer tokens, long hex secrets, ``password=...``-like pairs) from the
message and the traceback, whatever logged them.

Metrics: prometheus-client metrics, defined once here; with ``PROMETHEUS_MULTIPROC_DIR`` set (before the
process starts) every process writes its samples there and a scrape adds them up (``render``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from dishka import AsyncContainer
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY, Collector

from application.ports.gauges import BacklogGauges, WorkBacklog
from application.ports.platform import Clock, UnitOfWork

# ---- logs -------------------------------------------------------------------------------------------------

LINE_FIELDS = ("request_id", "organization_id", "route", "method", "status", "duration_ms", "outcome",
               "job_kind", "job_id", "job_key", "attempt")
"""Extra fields a log call may pass (``extra=``); each becomes a key of the JSON line."""

REDACTED = "[REDACTED]"
_SECRET_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"parley_sk_[A-Za-z0-9]+"), "parley_sk_" + REDACTED),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 " + REDACTED),
    (re.compile(r"(?i)([\"']?(?:password|passwd|secret|token|credentials|api_key|authorization|auth_token)"
                r"[\"']?\s*[:=]\s*)(?!(?:bearer|basic)\s|\[REDACTED\])(\"[^\"]*\"|'[^']*'|[^\s,;}&]+)"),
     r"\1" + REDACTED),
    (re.compile(r"(?i)\b[0-9a-f]{40,}\b"), REDACTED),  # signing secrets, tokens (a request id has 32)
    (re.compile(r"(://[^/\s:@]+:)[^@\s/]+@"), r"\1" + REDACTED + "@"),  # a password in a URL
)


# every shape at once, case-insensitively (a superset of what they match): most text has none of them and is
# looked at once instead of once per shape (a request line has four strings and a message)
_ANY_SECRET = re.compile("|".join(f"(?:{pattern.pattern.removeprefix('(?i)')})" for pattern, _ in _SECRET_SHAPES),
                         re.IGNORECASE)


def redact(text: str) -> str:
    if _ANY_SECRET.search(text) is None:
        return text
    for pattern, replacement in _SECRET_SHAPES:
        text = pattern.sub(replacement, text)
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, request_id and the record's known extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for name in LINE_FIELDS:
            value = getattr(record, name, None)
            if value is not None and value != "-":
                line[name] = redact(value) if isinstance(value, str) else value
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, default=str)


class ConsoleFormatter(logging.Formatter):
    """The readable line: time, level, logger, [request id], message (redacted like the JSON line)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def outcome_of(status: int) -> str:
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "error"
    if status >= 400:
        return "rejected"
    return "ok"


# ---- metrics ----------------------------------------------------------------------------------------------

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

disable_created_metrics()  # no ``*_created`` twin of every counter and histogram series

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})
"""The methods a metric names as they are; any other a client sends is counted as ``other`` (a client must not
be able to make series)."""


def method_label(method: str) -> str:
    return method if method in KNOWN_METHODS else "other"

HTTP_REQUESTS = Counter("parley_http_requests_total", "HTTP requests answered, by route template, method and status",
                        ["route", "method", "status"])
HTTP_DURATION = Histogram("parley_http_request_duration_seconds", "Time to answer an HTTP request, by route template",
                          ["route"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
RATE_LIMIT_REFUSALS = Counter("parley_rate_limit_refusals_total",
                              "Requests refused with 429 (a key's rate limit or an address's failed authentications)",
                              ["reason"])
WEBHOOK_DELIVERIES = Counter("parley_webhook_deliveries_total", "Webhook delivery attempts, by outcome", ["outcome"])
JOBS = Counter("parley_jobs_total", "Job runs, by kind and outcome (ok, retry, failed)", ["kind", "outcome"])
MEDIA_FRAME_GAP = Histogram("parley_media_frame_gap_seconds",
                            "Time between two consecutive outbound 20 ms frames of a media session while it plays",
                            buckets=(0.021, 0.022, 0.025, 0.03, 0.035, 0.04, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0))
JOB_LEASE_EXPIRIES = Counter("parley_job_lease_expiries_total",
                             "Jobs claimed again after the lease of a runner that did not finish them expired",
                             ["kind"])


class _Snapshot(Collector):
    """Gauges read from the database at scrape time (one query set per scrape)."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def collect(self) -> Iterable[GaugeMetricFamily]:
        helps = {
            "parley_outbox_backlog": "Outbox events not yet processed by every consumer",
            "parley_outbox_oldest_age_seconds": "Age of the oldest outbox event not yet processed (0: none)",
            "parley_dialer_in_flight": "Campaign contacts being dialled (a call placed, no outcome yet)",
            "parley_dialer_due": "Campaign contacts due for a call now",
        }
        for name, text in helps.items():
            if name in self.values:
                yield GaugeMetricFamily(name, text, value=self.values[name])


def use_multiprocess_directory() -> None:
    """Pick prometheus-client's value class again from ``PROMETHEUS_MULTIPROC_DIR``: a server process forked from
    one that imported prometheus-client before the variable was set (granian's workers, forked from the
    `parley serve` that sets it) then writes its samples there too. Every metric here has labels, and a labelled
    metric makes its values when a label set is first used, so they all get the class chosen now."""
    from prometheus_client import values

    values.ValueClass = values.get_value_class()


def render(snapshot: dict[str, float] | None = None) -> bytes:
    """The exposition text: this process's metrics (every process's, in multiprocess mode) and ``snapshot``."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    if snapshot:
        extra = CollectorRegistry()
        extra.register(_Snapshot(snapshot))
        text += generate_latest(extra)
    return text


def backlog_values(backlog: WorkBacklog | None, now: datetime) -> dict[str, float]:
    if backlog is None:
        return {}
    oldest = backlog.outbox_oldest_at
    return {"parley_outbox_backlog": backlog.outbox_backlog,
            "parley_outbox_oldest_age_seconds": max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
            "parley_dialer_in_flight": backlog.dialer_in_flight, "parley_dialer_due": backlog.dialer_due}


async def read_backlog(container: AsyncContainer, context: dict[Any, Any] | None = None) -> dict[str, float]:
    """The scrape-time gauges, read in a unit of work of ``container`` (rolled back), ``context`` given to it."""
    async with container(context=context) as request:
        clock = await request.get(Clock)
        now = clock.now()
        try:
            backlog = await (await request.get(BacklogGauges)).read(now)
        finally:
            await (await request.get(UnitOfWork)).rollback()
    return backlog_values(backlog, now)


def count_request(route: str, method: str, status: int, seconds: float) -> None:
    HTTP_REQUESTS.labels(route, method_label(method), str(status)).inc()
    HTTP_DURATION.labels(route).observe(seconds)


class JobMetrics:
    """The job runner's observer (``application.ports.jobs.JobObserver``): counts runs and lease expiries."""

    def job_finished(self, kind: str, outcome: str) -> None:
        JOBS.labels(kind, outcome).inc()

    def leases_expired(self, kind: str, job_ids: Sequence[int]) -> None:
        if job_ids:
            JOB_LEASE_EXPIRIES.labels(kind).inc(len(job_ids))


class DeliveryMetrics:
    """The delivery pump's observer (``application.ports.webhooks.DeliveryObserver``): counts attempts by outcome."""

    def delivered(self, status: str) -> None:
        WEBHOOK_DELIVERIES.labels(status).inc()

"""What a webhook delivery writes to the log of a Parley process: one WARNING line of Parley's own
per failed attempt (never the secret or the signature), and no line of the HTTP client per request."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from entrypoints.runtime import QUIET_LOGGERS, configure_logging
from tests.support.receiver import Reply
from tests.support.webhooks import Harness


@pytest.fixture
def process_logging(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The logging `parley serve` and `parley worker` set up (INFO), observed through caplog."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    configure_logging("INFO")
    root.addHandler(caplog.handler)
    caplog.handler.setLevel(logging.DEBUG)
    try:
        yield caplog
    finally:
        root.handlers[:], level, quiet = saved
        root.setLevel(level)
        for name, value in quiet.items():
            logging.getLogger(name).setLevel(value)


async def test_a_failed_attempt_logs_one_warning_and_the_http_client_stays_quiet(
        harness: Harness, process_logging: pytest.LogCaptureFixture) -> None:
    h = harness
    t = await h.api.tenant()
    hook = await h.subscribe(t, ["call.ended"])
    h.receiver.script("/hook", Reply(500, b"database down"))
    await h.emit(t.organization_id, "call.ended", {"id": "call-1"})
    await h.drain()
    h.clock.advance(seconds=6)
    await h.drain()  # the retry succeeds
    assert [r.headers["x-webhook-event"] for r in h.receiver.requests] == ["call.ended", "call.ended"]

    records = process_logging.records
    assert not [r for r in records if r.name.split(".")[0] in QUIET_LOGGERS], "one INFO line per request"
    warnings = [r for r in records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    line = warnings[0].getMessage()
    assert warnings[0].levelno == logging.WARNING and warnings[0].name.startswith("parley.")
    assert f"webhook {hook['id']}" in line and "call.ended" in line and "attempt 1" in line and "500" in line
    signature = h.receiver.requests[0].headers["x-webhook-signature"]
    assert hook["secret"] not in process_logging.text and signature not in process_logging.text
    assert not warnings[0].exc_info

"""SMS rules: encoding and segment counts (a table of known cases), the forward-only status machine, keywords."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from domain import sms
from domain.sms import SmsMessage, StatusEvent, keyword, segment

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

# (body, encoding, segments, units: septets for gsm7, UTF-16 code units for ucs2)
KNOWN_CASES = [
    ("Hello", "gsm7", 1, 5),
    ("Your code is 4711. Reply STOP to opt out.", "gsm7", 1, 41),
    ("@£$¥èéùìòÇØøÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ!\"#¤%&'()*+,-./:;<=>?¡ÄÖÑÜ§¿äöñüà\n\r", "gsm7", 1, 64),
    ("^{}[]~|€\\", "gsm7", 1, 18),              # the extension set: two septets each
    ("\f", "gsm7", 1, 2),                      # form feed is in the extension table too
    ("A" * 160, "gsm7", 1, 160),
    ("A" * 161, "gsm7", 2, 161),
    ("A" * 306, "gsm7", 2, 306),
    ("A" * 307, "gsm7", 3, 307),
    ("€" * 80, "gsm7", 1, 160),
    ("€" * 81, "gsm7", 2, 162),
    ("A" * 159 + "€", "gsm7", 2, 161),         # the escape pushes it over 160
    ("A" * 152 + "€" + "A" * 152, "gsm7", 3, 306),  # an escape sequence is never split across parts
    ("ΔΦΓΛΩΠΨΣΘΞ", "gsm7", 1, 10),            # the Greek capitals of the GSM alphabet
    ("Καλημέρα", "ucs2", 1, 8),               # other Greek letters need UCS-2
    ("ΑΒΓ", "ucs2", 1, 3),                     # Greek capital alpha and beta are not the Latin A and B
    ("Şişli'de görüşürüz", "ucs2", 1, 18),    # Turkish s-cedilla, g-breve, dotless i are not GSM
    ("Öğle", "ucs2", 1, 4),
    ("\u0131", "ucs2", 1, 1),                 # dotless i
    ("Hello 😀", "ucs2", 1, 8),                 # an emoji is two UTF-16 code units
    ("😀" * 35, "ucs2", 1, 70),
    ("😀" * 36, "ucs2", 2, 72),
    ("ğ" * 70, "ucs2", 1, 70),
    ("ğ" * 71, "ucs2", 2, 71),
    ("ğ" * 134, "ucs2", 2, 134),
    ("ğ" * 135, "ucs2", 3, 135),
    ("A" * 66 + "😀" + "A" * 66, "ucs2", 3, 134),       # a surrogate pair is never split across parts
    ("A" * 159 + "ç", "ucs2", 3, 160),        # one non-GSM character turns the whole body to UCS-2
    ("x" * 1600, "gsm7", 11, 1600),
]


@pytest.mark.parametrize(("body", "encoding", "segments", "units"), KNOWN_CASES)
def test_encoding_and_segments_of_known_messages(body: str, encoding: str, segments: int, units: int) -> None:
    found = segment(body)
    assert (found.encoding, found.segments, found.units) == (encoding, segments, units)


def test_the_gsm_tables_are_the_standard_ones() -> None:
    assert len(sms.GSM7_BASIC) == 127  # 128 codes, 0x1B being the escape
    assert set("\f^{}\\[~]|€") == sms.GSM7_EXTENSION
    assert not sms.GSM7_BASIC & sms.GSM7_EXTENSION
    assert "\x60" not in sms.GSM7_BASIC and "ç" not in sms.GSM7_BASIC


def _message(status: str = "queued") -> SmsMessage:
    return SmsMessage(1, 7, "outbound", "+1555010099", "+14155550123", "Hi", status, "gsm7", 1, T0, T0,
                      status_events=(StatusEvent("queued", T0),))


def test_receipts_move_the_status_forward() -> None:
    m, applied = _message().receive("sent", T0 + timedelta(seconds=1))
    assert applied and m.status == "sent" and m.sent_at == T0 + timedelta(seconds=1)
    m, applied = m.receive("delivered", T0 + timedelta(seconds=3))
    assert applied and m.status == "delivered" and m.delivered_at == T0 + timedelta(seconds=3)
    assert [(e.status, e.applied) for e in m.status_events] == [("queued", True), ("sent", True), ("delivered", True)]


def test_an_out_of_order_receipt_is_kept_but_never_moves_back() -> None:
    m, applied = _message().receive("delivered", T0 + timedelta(seconds=3))
    assert applied and m.status == "delivered" and m.sent_at == T0 + timedelta(seconds=3)
    m, applied = m.receive("sent", T0 + timedelta(seconds=1))
    assert not applied and m.status == "delivered"
    m, applied = m.receive("failed", T0 + timedelta(seconds=4), "30008")
    assert not applied and m.status == "delivered" and m.error_code is None
    assert [(e.status, e.applied) for e in m.status_events] == [
        ("queued", True), ("delivered", True), ("sent", False), ("failed", False)]


@pytest.mark.parametrize("final", ["delivered", "undelivered", "failed"])
@pytest.mark.parametrize("receipt", ["sent", "delivered", "undelivered", "failed"])
def test_nothing_moves_a_final_status(final: str, receipt: str) -> None:
    m, applied = _message(final).receive(receipt, T0)
    assert not applied and m.status == final and len(m.status_events) == 2


def test_failure_keeps_its_error_code() -> None:
    m, _ = _message().receive("sent", T0)
    m, applied = m.receive("undelivered", T0, "30003")
    assert applied and m.status == "undelivered" and m.error_code == "30003"


def test_the_machine_moves_only_forward() -> None:
    rank = {"queued": 0, "sent": 1, "delivered": 2, "undelivered": 2, "failed": 2}
    for (src, _), dst in sms.SMS_MACHINE.moves.items():
        assert rank[dst] > rank[src]
    assert not any(src in sms.FINAL_STATUSES for src, _ in sms.SMS_MACHINE.moves)


@pytest.mark.parametrize(("body", "expected"), [
    ("STOP", "stop"), ("stop", "stop"), ("  Stop \n", "stop"), ("STOPALL", "stop"), ("unsubscribe", "stop"),
    ("CANCEL", "stop"), ("end", "stop"), ("Quit", "stop"), ("START", "start"), (" unstop ", "start"),
    ("STOP please", None), ("please stop", None), ("STOP.", None), ("", None), ("Hello", None), ("STAR", None),
])
def test_keywords_are_the_whole_message(body: str, expected: str | None) -> None:
    assert keyword(body) == expected

"""Reading contact rows from CSV: one row at a time, hostile files refused or their rows rejected."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.campaigns import ContactDraft, CsvUnreadable, RowRejection, csv_contacts
from domain.text import ONE_LINE_WORDS
from tests.properties import examples


def rows(text: str) -> list[ContactDraft | RowRejection]:
    return list(csv_contacts(io.StringIO(text, newline="")))


def test_known_columns_and_custom_data() -> None:
    found = rows(" Phone ,NAME,timezone,crm_id,plan\n+14155550100,Ada,Europe/London,A-17,\n")
    assert found == [ContactDraft(2, "+14155550100", "Ada", "Europe/London", {"crm_id": "A-17"})]


def test_row_numbers_are_spreadsheet_rows_and_blank_lines_are_skipped() -> None:
    found = rows("phone\n+14155550100\n\n+14155550101\n")
    assert [r.row for r in found] == [2, 4]


def test_formula_looking_values_stay_text() -> None:
    [draft] = rows('phone,note\n+14155550100,"=cmd|\' /C calc\'!A0"\n')
    assert isinstance(draft, ContactDraft) and draft.custom_data == {"note": "=cmd|' /C calc'!A0"}


@pytest.mark.parametrize("text", ["", "\n\n", "name,timezone\nAda,UTC\n", "phone;name\n+14155550100;Ada\n",
                                  "phone,phone\n1,2\n", "ph\x00one\n1\n"])
def test_files_without_a_usable_header_are_unreadable(text: str) -> None:
    with pytest.raises(CsvUnreadable) as refused:
        rows(text)
    assert list(refused.value.details["validation_errors"]) == ["file"]


def test_bad_rows_are_rejected_with_their_row_and_field() -> None:
    found = rows("phone,name\n+1415\x005550100,Ada\n+14155550101,Bob,extra\n+14155550102,\"" + "x" * 300 + "\"\n")
    assert found == [
        RowRejection(2, "phone", ONE_LINE_WORDS),
        RowRejection(3, "row", "has 3 values but the header names 2 columns"),
        RowRejection(4, "name", "must be at most 200 characters"),
    ]


def test_an_oversized_field_rejects_its_row_and_reading_goes_on() -> None:
    found = rows('phone,note\n+14155550100,"' + "x" * 200_000 + '"\n+14155550101,ok\n')
    assert isinstance(found[0], RowRejection) and found[0].field == "row"
    assert isinstance(found[-1], ContactDraft) and found[-1].phone == "+14155550101"


def test_undecodable_bytes_make_the_file_unreadable() -> None:
    stream = io.TextIOWrapper(io.BytesIO(b"phone\n+14155550100\n\xff\xfe\n"), encoding="utf-8-sig", newline="")
    with pytest.raises(CsvUnreadable, match="UTF-8"):
        list(csv_contacts(stream))


def test_a_byte_order_mark_is_not_part_of_the_header() -> None:
    stream = io.TextIOWrapper(io.BytesIO("\ufeffphone\n+14155550100\n".encode()), encoding="utf-8-sig", newline="")
    assert [r.phone for r in csv_contacts(stream) if isinstance(r, ContactDraft)] == ["+14155550100"]


@given(st.text(max_size=300))
@settings(max_examples=examples(200))
def test_any_text_is_rows_rejections_or_unreadable(text: str) -> None:
    try:
        found = rows("phone,name\n" + text)
    except CsvUnreadable:
        return
    for item in found:
        assert isinstance(item, ContactDraft | RowRejection)
        if isinstance(item, ContactDraft):
            assert "\x00" not in item.phone and "\x00" not in (item.name or "")


def test_rows_are_read_lazily_one_at_a_time() -> None:
    def endless() -> Iterator[str]:
        yield "phone\n"
        for n in itertools.count():
            yield f"+1415{n:07d}\n"

    first = list(itertools.islice(csv_contacts(endless()), 3))
    assert [r.row for r in first] == [2, 3, 4]

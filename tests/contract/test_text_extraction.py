"""LocalTextExtractor: every supported type from generated files, types sniffed from content, and
the defences against bombs, huge page counts and binary junk."""

from __future__ import annotations

import io
import random

import pytest

from adapters.documents import LocalTextExtractor
from application.ports.egress import FetchedPage
from application.ports.knowledge import ExtractionFailed
from tests.knowledge_samples import (
    CSV,
    HTML_PAGE,
    MARKDOWN,
    TEXT,
    make_blank_pdf,
    make_docx,
    make_docx_bomb,
    make_pdf,
    make_zip,
)

extractor = LocalTextExtractor()


async def test_pdf_text_is_extracted_page_by_page() -> None:
    pdf = make_pdf([["Warranty covers two years (parts)", "and labour."], ["Batteries: six months."]])
    got = await extractor.extract_file("manual.pdf", pdf)
    assert got.file_type == "pdf"
    assert "Warranty covers two years (parts)" in got.text and "Batteries: six months." in got.text


async def test_docx_paragraphs_and_tables_are_extracted() -> None:
    data = make_docx(["Opening hours", "We open at nine."], [["Day", "Hours"], ["Saturday", "10-14"]])
    got = await extractor.extract_file("hours.docx", data)
    assert got.file_type == "docx"
    assert got.text == "Opening hours\n\nWe open at nine.\n\nDay | Hours\n\nSaturday | 10-14"


async def test_html_main_text_is_extracted() -> None:
    got = await extractor.extract_file("refunds.html", HTML_PAGE.encode())
    assert got.file_type == "html"
    assert "within thirty days" in got.text and "<p>" not in got.text


@pytest.mark.parametrize(("name", "content", "file_type"), [
    ("faq.md", MARKDOWN, "md"),
    ("faq.markdown", MARKDOWN, "md"),
    ("faq.csv", CSV, "csv"),
    ("notes.txt", TEXT, "txt"),
    ("README", TEXT, "txt"),
])
async def test_text_types_follow_the_name_only_when_the_content_is_text(name: str, content: str,
                                                                        file_type: str) -> None:
    got = await extractor.extract_file(name, content.encode())
    assert got.file_type == file_type and got.text == content.strip()


@pytest.mark.parametrize(("name", "make", "file_type"), [
    ("notes.txt", lambda: make_pdf([["really a pdf"]]), "pdf"),
    ("report.pdf", lambda: b"plain words, not a PDF at all", "txt"),
    ("data.csv", lambda: make_docx(["really a docx"]), "docx"),
    ("page.txt", lambda: HTML_PAGE.encode(), "html"),
    ("page.md", lambda: b"\xef\xbb\xbf<!doctype html><html><body><p>bom first</p></body></html>", "html"),
])
async def test_the_type_is_sniffed_from_the_content_not_the_name(name: str, make, file_type: str) -> None:  # type: ignore[no-untyped-def]
    assert (await extractor.extract_file(name, make())).file_type == file_type


async def test_utf16_with_a_bom_is_text() -> None:
    got = await extractor.extract_file("win.txt", "Hello from Notepad".encode("utf-16"))
    assert (got.file_type, got.text) == ("txt", "Hello from Notepad")


def _encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([["secret"]]))))
    writer.encrypt(user_password="pw", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


JUNK = random.Random(7).randbytes(4096)

REFUSED = [
    ("empty.txt", b"", "empty_file"),
    ("blank.txt", b"  \n\t \n", "empty_file"),
    ("tags-only.html", b"<html><body><div></div></body></html>", "empty_file"),
    ("photo.png", b"\x89PNG\r\n\x1a\n" + JUNK, "unsupported_file_type"),
    ("photo.jpg", b"\xff\xd8\xff\xe0" + JUNK, "unsupported_file_type"),
    ("archive.gz", b"\x1f\x8b\x08\x00" + JUNK, "unsupported_file_type"),
    ("legacy.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + JUNK, "unsupported_file_type"),
    ("program.txt", b"\x7fELF\x02\x01\x01" + JUNK, "unsupported_file_type"),
    ("random.txt", JUNK, "unsupported_file_type"),
    ("nul.txt", b"looks like text\x00but has a NUL", "unsupported_file_type"),
    ("controls.txt", b"text" + b"\x01\x02\x03\x04\x05\x06" * 20, "unsupported_file_type"),
    ("latin1.txt", "caf\xe9 cr\xe8me".encode("latin-1"), "unreadable_file"),
    ("sheet.xlsx", make_zip({"xl/workbook.xml": b"<workbook/>"}), "unsupported_file_type"),
    ("broken.docx", b"PK\x03\x04" + JUNK, "unsupported_file_type"),
    ("bomb.docx", make_docx_bomb(), "unreadable_file"),
    ("many.docx", make_zip({f"word/part{i}.xml": b"x" for i in range(2001)} | {"word/document.xml": b"<x/>"}),
     "unreadable_file"),
    ("broken.pdf", b"%PDF-1.7\n" + JUNK, "unreadable_file"),
    ("huge.pdf", make_blank_pdf(501), "unreadable_file"),
    ("locked.pdf", _encrypted_pdf(), "unreadable_file"),
]


@pytest.mark.parametrize(("name", "data", "code"), REFUSED, ids=[r[0] for r in REFUSED])
async def test_junk_bombs_and_unsupported_files_are_refused(name: str, data: bytes, code: str) -> None:
    with pytest.raises(ExtractionFailed) as caught:
        await extractor.extract_file(name, data)
    assert caught.value.code == code
    assert len(caught.value.message) < 200


async def test_a_docx_bomb_is_refused_before_inflating() -> None:
    bomb = make_docx_bomb(40 * 1024 * 1024)
    assert len(bomb) < 100_000
    with pytest.raises(ExtractionFailed, match="ZIP bomb"):
        await extractor.extract_file("bomb.docx", bomb)


async def test_total_uncompressed_size_of_a_docx_is_capped() -> None:
    small = LocalTextExtractor(max_docx_uncompressed=10_000)
    with pytest.raises(ExtractionFailed, match="ZIP bomb"):
        await small.extract_file("a.docx", make_docx(["x" * 20_000]))


async def test_text_longer_than_the_cap_is_refused() -> None:
    small = LocalTextExtractor(max_chars=100)
    with pytest.raises(ExtractionFailed) as caught:
        await small.extract_file("long.txt", b"word " * 100)
    assert caught.value.code == "text_too_long"
    with pytest.raises(ExtractionFailed):
        await small.extract_file("long.pdf", make_pdf([["word " * 30] * 3]))


def _page(body: bytes, content_type: str = "text/html", charset: str | None = "utf-8") -> FetchedPage:
    return FetchedPage("https://example.com/", 200, content_type, charset, body)


async def test_pages_give_their_main_text_and_title() -> None:
    got = await extractor.extract_page(_page(HTML_PAGE.encode()))
    assert (got.file_type, got.title) == ("html", "Returns & refunds")
    assert "original payment method" in got.text and "Copyright" not in got.text
    plain = await extractor.extract_page(_page(b"Plain words.", "text/plain"))
    assert (plain.file_type, plain.text, plain.title) == ("txt", "Plain words.", None)
    latin = await extractor.extract_page(_page("<p>Cr\xe8me br\xfbl\xe9e</p>".encode("latin-1"), charset="iso-8859-1"))
    assert "Crème brûlée" in latin.text
    unknown = await extractor.extract_page(_page(b"<p>fine</p>", charset="no-such-charset"))
    assert unknown.text == "fine"


@pytest.mark.parametrize(("body", "content_type"), [
    (b"", "text/html"),
    (b"   ", "text/plain"),
    (JUNK, "text/plain"),
    (b"\x00\x01binary" * 50, "text/html"),
    (b"<html><body><script>var x = 1;</script></body></html>", "text/html"),
])
async def test_pages_without_readable_text_are_refused(body: bytes, content_type: str) -> None:
    with pytest.raises(ExtractionFailed):
        await extractor.extract_page(_page(body, content_type))

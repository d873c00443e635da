"""Text extraction from uploaded files and fetched pages: pypdf, python-docx and trafilatura.

The type of a file is sniffed from its bytes, never taken from its name: ``%PDF-`` is a PDF, a
ZIP holding ``word/document.xml`` is a DOCX, text that opens like an HTML document is HTML, and
other valid UTF-8 text is txt (md or csv when the name says so). Defences, all checked before
the expensive part runs: ZIP bombs (entry count, total declared size and compression ratio;
zipfile itself stops at the declared sizes), PDFs with too many pages, and binary junk (NUL
bytes, invalid UTF-8, control characters). Extracted text is capped at ``MAX_TEXT_CHARS``.

``LocalTextExtractor`` parses in a thread of the calling process; the application is wired with
``IsolatedTextExtractor`` (isolated.py), which runs the same code in worker processes with time and
memory limits.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import html
import io
import logging
import re
import zipfile
from collections.abc import Iterable
from typing import Any

from application.ports.egress import FetchedPage
from application.ports.knowledge import ExtractedText, ExtractionFailed
from domain.knowledge import MAX_PDF_PAGES, MAX_TEXT_CHARS, TEXT_TOO_LONG, extension, normalise_text

MAX_DOCX_ENTRIES = 2000
MAX_DOCX_UNCOMPRESSED = 50 * 1024 * 1024
MAX_ZIP_RATIO = 100
_RATIO_FLOOR = 1024 * 1024  # small entries may compress as well as they like
MAX_CONTROL_RATIO = 0.01
MAX_HTML_ELEMENTS = 200_000

UNSUPPORTED = "unsupported_file_type"
UNREADABLE = "unreadable_file"
EMPTY = "empty_file"
TOO_LONG = "text_too_long"

MSG_UNSUPPORTED = "unsupported file type: only txt, md, csv, html, pdf and docx files are accepted"
MSG_BINARY = "the file is binary, not text: only txt, md, csv, html, pdf and docx files are accepted"
MSG_NOT_UTF8 = "the file is not valid UTF-8 text"
MSG_EMPTY = "the file contains no text"
MSG_TOO_LONG = TEXT_TOO_LONG
MSG_PDF = "the PDF could not be read"
MSG_PDF_ENCRYPTED = "the PDF is encrypted"
MSG_PDF_PAGES = f"the PDF has more than {MAX_PDF_PAGES} pages"
MSG_DOCX = "the DOCX file could not be read"
MSG_BOMB = "the DOCX file expands to more than the allowed size (possible ZIP bomb)"

_BINARY_MAGIC = (
    b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"\x1f\x8b", b"\xd0\xcf\x11\xe0", b"Rar!", b"7z\xbc\xaf",
    b"BZh", b"\x7fELF", b"MZ", b"OggS", b"ID3", b"RIFF", b"\x00\x00\x00", b"%!PS",
)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_HTML_START = re.compile(
    r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)[\s>/]",
    re.IGNORECASE | re.DOTALL,
)
_DOCUMENT_TAG = re.compile(r"<(?:html|body)[\s>]", re.IGNORECASE)
_TAG = re.compile(r"<[a-zA-Z][^>]{0,200}>")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_CONTROL_BYTES = frozenset(set(range(0x20)) - {0x09, 0x0A, 0x0C, 0x0D}) | {0x7F}

log = logging.getLogger("parley.documents")


def _check_length(text: str, limit: int) -> str:
    if len(text) > limit:
        raise ExtractionFailed(MSG_TOO_LONG, TOO_LONG)
    return text


def decode_text(data: bytes) -> str:
    """Text from bytes that must be text: UTF-8 (a BOM is dropped), or UTF-16 with a BOM.
    Raises ExtractionFailed for NUL bytes, invalid UTF-8 or too many control characters."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            raise ExtractionFailed(MSG_NOT_UTF8, UNREADABLE) from None
        if "\x00" in text:
            raise ExtractionFailed(MSG_BINARY, UNSUPPORTED)
        return text.lstrip("\ufeff")
    if b"\x00" in data:
        raise ExtractionFailed(MSG_BINARY, UNSUPPORTED)
    controls = sum(data.count(bytes([b])) for b in _CONTROL_BYTES)
    if controls > max(8, len(data) * MAX_CONTROL_RATIO):
        raise ExtractionFailed(MSG_BINARY, UNSUPPORTED)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ExtractionFailed(MSG_NOT_UTF8, UNREADABLE) from None


def looks_like_html(text: str, file_name: str = "") -> bool:
    head = text[:8192]
    if _HTML_START.match(head):
        return True
    return extension(file_name) in ("html", "htm", "xhtml") and _TAG.search(head) is not None


def sniff(data: bytes) -> str:
    """pdf, zip, binary or text (text still has to decode)."""
    head = data[:1024]
    if head.lstrip(b" \t\r\n\x0c").startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(_ZIP_MAGIC):
        return "zip"
    if head.startswith(_BINARY_MAGIC):
        return "binary"
    return "text"


@functools.cache
def _trafilatura_config() -> Any:
    from trafilatura.settings import use_config

    config = use_config()
    config.set("DEFAULT", "MAX_TREE_SIZE", str(MAX_HTML_ELEMENTS))
    config.set("DEFAULT", "EXTRACTION_TIMEOUT", "0")
    return config


def html_to_text(markup: str | bytes) -> str:
    """The main text of an HTML document (trafilatura's ``extract``, never its fetcher), or all
    of its text when no main part stands out."""
    import trafilatura

    if isinstance(markup, str) and not _DOCUMENT_TAG.search(markup[:65536]):
        markup = f"<html><body>{markup}</body></html>"  # a fragment: give the parser a document
    text: str | None = None
    try:
        text = trafilatura.extract(
            markup, include_comments=False, include_tables=True, favor_recall=True, deduplicate=False,
            config=_trafilatura_config(),
        )
        if not text:
            text = trafilatura.html2txt(markup)
    except Exception as exc:  # trafilatura on hostile markup: treat as unreadable, never leak details
        log.warning("HTML extraction failed (%s); the document is unreadable", type(exc).__name__)
        raise ExtractionFailed("the HTML could not be read", UNREADABLE) from None
    return text or ""


def html_title(markup: str) -> str | None:
    found = _TITLE.search(markup[:65536])
    if not found:
        return None
    title = normalise_text(html.unescape(re.sub(r"<[^>]*>", "", found.group(1)))).replace("\n", " ")
    return title or None


class LocalTextExtractor:
    """:class:`application.ports.knowledge.TextExtractor` in-process, with pypdf, python-docx
    and trafilatura."""

    def __init__(self, *, max_chars: int = MAX_TEXT_CHARS, max_pages: int = MAX_PDF_PAGES,
                 max_docx_uncompressed: int = MAX_DOCX_UNCOMPRESSED) -> None:
        self.max_chars = max_chars
        self.max_pages = max_pages
        self.max_docx_uncompressed = max_docx_uncompressed

    async def extract_file(self, file_name: str, data: bytes) -> ExtractedText:
        return await asyncio.to_thread(self.extract_file_now, file_name, data)

    async def extract_page(self, page: FetchedPage) -> ExtractedText:
        return await asyncio.to_thread(self.extract_page_now, page)

    # -- files ----------------------------------------------------------------------------

    def extract_file_now(self, file_name: str, data: bytes) -> ExtractedText:
        if not data.strip():
            raise ExtractionFailed(MSG_EMPTY, EMPTY)
        kind = sniff(data)
        if kind == "pdf":
            file_type, text = "pdf", self._pdf(data)
        elif kind == "zip":
            file_type, text = "docx", self._docx(data)
        elif kind == "binary":
            raise ExtractionFailed(MSG_BINARY, UNSUPPORTED)
        else:
            decoded = _check_length(decode_text(data), 2 * self.max_chars)  # cheap early refusal
            if looks_like_html(decoded, file_name):
                file_type, text = "html", html_to_text(decoded)
            else:
                suffix = extension(file_name)
                file_type = {"md": "md", "markdown": "md", "csv": "csv"}.get(suffix, "txt")
                text = decoded
        text = _check_length(normalise_text(text), self.max_chars)
        if not text:
            raise ExtractionFailed(MSG_EMPTY, EMPTY)
        return ExtractedText(file_type, text)

    def _pdf(self, data: bytes) -> str:
        from pypdf import PdfReader

        try:
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted and not reader.decrypt(""):
                raise ExtractionFailed(MSG_PDF_ENCRYPTED, UNREADABLE)
            pages = reader.pages
            if len(pages) > self.max_pages:
                raise ExtractionFailed(MSG_PDF_PAGES, UNREADABLE)
            parts: list[str] = []
            total = 0
            for page in pages:
                text = page.extract_text() or ""
                total += len(text)
                if total > self.max_chars * 2:  # before normalising, whitespace may shrink
                    raise ExtractionFailed(MSG_TOO_LONG, TOO_LONG)
                parts.append(text)
        except ExtractionFailed:
            raise
        except Exception as exc:  # pypdf raises many kinds of errors on malformed files
            log.warning("PDF extraction failed (%s); the document is unreadable", type(exc).__name__)
            raise ExtractionFailed(MSG_PDF, UNREADABLE) from None
        return "\n\n".join(parts)

    def _check_zip(self, archive: zipfile.ZipFile) -> None:
        entries = archive.infolist()
        if len(entries) > MAX_DOCX_ENTRIES:
            raise ExtractionFailed(MSG_BOMB, UNREADABLE)
        total = 0
        for entry in entries:
            total += entry.file_size
            if total > self.max_docx_uncompressed:
                raise ExtractionFailed(MSG_BOMB, UNREADABLE)
            if entry.file_size > _RATIO_FLOOR and entry.file_size > MAX_ZIP_RATIO * max(entry.compress_size, 1):
                raise ExtractionFailed(MSG_BOMB, UNREADABLE)

    def _docx(self, data: bytes) -> str:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                self._check_zip(archive)
                if "word/document.xml" not in archive.namelist():
                    raise ExtractionFailed(MSG_UNSUPPORTED, UNSUPPORTED)
        except ExtractionFailed:
            raise
        except Exception:
            raise ExtractionFailed(MSG_UNSUPPORTED, UNSUPPORTED) from None
        try:
            import docx

            document = docx.Document(io.BytesIO(data))
            return "\n\n".join(_docx_blocks(document.iter_inner_content()))
        except Exception as exc:
            log.warning("DOCX extraction failed (%s); the document is unreadable", type(exc).__name__)
            raise ExtractionFailed(MSG_DOCX, UNREADABLE) from None

    # -- pages ----------------------------------------------------------------------------

    def extract_page_now(self, page: FetchedPage) -> ExtractedText:
        body = page.body
        if not body.strip():
            raise ExtractionFailed("the page is empty", EMPTY)
        if page.content_type == "text/plain":
            text = _decode_page(body, page.charset)
            file_type, title = "txt", None
        else:
            if b"\x00" in body[:65536]:
                raise ExtractionFailed(MSG_BINARY, UNSUPPORTED)
            markup = _decode_page(body, page.charset)
            file_type, title = "html", html_title(markup)
            text = html_to_text(markup)
        text = _check_length(normalise_text(text), self.max_chars)
        if not text:
            raise ExtractionFailed("the page has no readable text", EMPTY)
        return ExtractedText(file_type, text, title)


def _decode_page(body: bytes, charset: str | None) -> str:
    """A page's text: the declared charset (UTF-8 when none or unknown); binary is refused."""
    encoding = "utf-8"
    if charset:
        try:
            encoding = codecs.lookup(charset).name
        except LookupError:
            encoding = "utf-8"
    if encoding.startswith("utf-16") or encoding.startswith("utf-32"):
        text = body.decode(encoding, errors="replace")
    else:
        if b"\x00" in body:
            raise ExtractionFailed(MSG_BINARY, UNSUPPORTED)
        text = body.decode(encoding, errors="replace")
    controls = sum(1 for c in text if ord(c) in _CONTROL_BYTES)
    if controls > max(8, len(text) * MAX_CONTROL_RATIO) or text.count("\ufffd") > max(8, len(text) * 0.05):
        raise ExtractionFailed(MSG_BINARY, UNSUPPORTED)
    return text


def _docx_blocks(blocks: Iterable[Any]) -> Iterable[str]:
    """Paragraphs as they are; tables row by row, cells separated by " | "."""
    for block in blocks:
        if hasattr(block, "rows"):
            for row in block.rows:
                cells = [cell.text.strip() for cell in row.cells]
                line = " | ".join(c for c in cells if c)
                if line:
                    yield line
        else:
            text = block.text.strip()
            if text:
                yield text

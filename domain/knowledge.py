"""Knowledge bases and their documents: fields, the document status machine, limits, and the
pure text rules (normalising, chunking, hashing, search terms, source URLs, file names)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from urllib.parse import quote

from domain.addresses import check_url
from domain.errors import ValidationFailed
from domain.state_machine import TransitionTable

FILE_TYPES = ("txt", "md", "csv", "html", "pdf", "docx")
SOURCES = ("upload", "scrape")


class DocumentStatus(StrEnum):
    """The status of a knowledge document."""

    PROCESSING = "processing"
    READY = "ready"
    FAILED = "failed"


DOCUMENT_STATUSES = tuple(DocumentStatus)

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
"""One upload request (every file together), enforced while the body streams in."""
MAX_FILES_PER_UPLOAD = 20
MAX_PAGE_BYTES = 5 * 1024 * 1024
"""A scraped page, after content decoding (gzip included)."""
MAX_TEXT_CHARS = 5_000_000
"""Extracted text of one document. Below the upload limit on purpose: a text file of over 5,000,000 characters
fits a request but not a document, and its refusal says so (``TEXT_TOO_LONG``)."""
TEXT_TOO_LONG = (f"its text is longer than {MAX_TEXT_CHARS:,} characters, the most one document holds (a request "
                 f"may carry {MAX_UPLOAD_BYTES // 2**20} MB of files, so a longer text must be split into several "
                 "files)")
MAX_PDF_PAGES = 500
MAX_FILE_NAME = 255
CHUNK_SIZE = 1000
CHUNK_OVERLAP = 150
MAX_SEARCH_TERMS = 32
MAX_TERM_LENGTH = 64

DOCUMENT_MACHINE = TransitionTable.of(
    "document",
    [
        ("processing", "finish", "ready"),
        ("processing", "fail", "failed"),
    ],
)


@dataclass(frozen=True, slots=True)
class KnowledgeBase:
    id: int | None
    organization_id: int
    agent_id: int
    """The owning agent: the knowledge base is always attached to it."""
    name: str
    description: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class AgentRef:
    """An agent a knowledge base is attached to."""

    id: int
    name: str


@dataclass(frozen=True, slots=True)
class Document:
    id: int | None
    organization_id: int
    knowledge_base_id: int
    file_name: str
    file_type: str
    source: str
    source_url: str | None = None
    content_hash: str | None = None
    status: str = "processing"
    error: str | None = None
    size_bytes: int = 0
    chunk_count: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def finish(self, chunk_count: int, at: datetime) -> Document:
        """Ingestion done: the text is chunked and searchable."""
        status = DOCUMENT_MACHINE.next(self.status, "finish", target="ready")
        return replace(self, status=status, chunk_count=chunk_count, error=None, updated_at=at)

    def fail(self, error: str, at: datetime) -> Document:
        status = DOCUMENT_MACHINE.next(self.status, "fail", target="failed")
        return replace(self, status=status, error=error, updated_at=at)


# -- text -----------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_MANY_NEWLINES = re.compile(r"\n{3,}")


def normalise_text(text: str) -> str:
    """Unix newlines, no control characters, single spaces inside lines, at most one blank line
    between paragraphs, nothing leading or trailing. NFC, so equal texts hash equally."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _CONTROL.sub("", text.replace("\x0c", "\n"))
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return _MANY_NEWLINES.sub("\n\n", "\n".join(lines)).strip()


def content_hash(text: str) -> str:
    """SHA-256 (hex) of the normalised text: the same content under another name is a duplicate."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


# Preferred places to end a chunk, best first.
_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")


def chunk_spans(text: str, size: int = CHUNK_SIZE, overlap: int = CHUNK_OVERLAP) -> list[tuple[int, int]]:
    """``(start, end)`` spans of at most ``size`` characters that cover ``text`` in order, each
    starting at or before the previous one's end (overlapping by up to ``overlap`` characters).

    A span ends at the best natural break (paragraph, line, sentence, clause, word) in its second
    half, or hard at ``size`` when there is none; the next one starts at a word boundary inside
    the overlap when there is one.
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError("need size >= 1 and 0 <= overlap < size")
    n = len(text)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < n:
        end = min(start + size, n)
        if end < n:
            floor = start + max(1, size // 2)
            hard = end
            for separator in _BREAKS:
                cut = text.rfind(separator, floor, hard)
                if cut != -1:
                    end = cut + len(separator)
                    break
            if spans and end <= spans[-1][1]:
                end = hard  # a break at or before the previous end would nest this span inside it
        spans.append((start, end))
        if end >= n:
            break
        following = max(end - overlap, start + 1)
        if following < end:
            space = text.find(" ", following, end)
            if space != -1 and space + 1 < end:
                following = space + 1
        start = following
    return spans


def chunk_text(text: str, size: int = CHUNK_SIZE, overlap: int = CHUNK_OVERLAP) -> list[str]:
    """The normalised text cut into overlapping chunks (see :func:`chunk_spans`), none empty."""
    clean = normalise_text(text)
    pieces = (clean[start:end].strip() for start, end in chunk_spans(clean, size, overlap))
    return [piece for piece in pieces if piece]


_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Lower-case words (letters and digits), in order, as the search indexes split them."""
    return _WORD.findall(unicodedata.normalize("NFC", text).lower())


def search_terms(query: str) -> list[str]:
    """The distinct words of a search query (at most 32, each at most 64 characters). Only
    letters and digits survive, so a term is safe in any full-text query syntax."""
    terms: list[str] = []
    for word in words(query):
        word = word[:MAX_TERM_LENGTH]
        if word not in terms:
            terms.append(word)
        if len(terms) == MAX_SEARCH_TERMS:
            break
    return terms


# -- names and URLs -------------------------------------------------------------------------

_ANY_PORT = range(1, 65536)


def normalise_source_url(url: str) -> str:
    """The canonical form of a page URL, used to recognise a page scraped before: lower-case
    scheme and host (IDNA), numeric hosts as the address they denote, default port dropped,
    fragment dropped, non-ASCII path characters percent-encoded. Raises ``ValidationFailed``
    (field ``url``) for anything that is not an absolute http(s) URL. Ports are not judged here
    (the fetcher does that)."""
    target = check_url(url.strip() if isinstance(url, str) else url, allowed_ports=_ANY_PORT)
    path = "".join(c if ord(c) < 128 else quote(c, safe="") for c in target.target)
    canonical = f"{target.scheme}://{target.authority}{path}"
    if len(canonical) > 2048:
        raise ValidationFailed.field("url", "must be at most 2048 characters")
    return canonical


_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f]")


def clean_file_name(name: str | None, fallback: str = "upload") -> str:
    """A file name as a client sent it, reduced to its last path part without control
    characters, at most 255 characters."""
    base = re.split(r"[/\\]", name or "")[-1]
    base = _UNSAFE_NAME.sub("", base).strip()
    if base in ("", ".", ".."):
        base = fallback
    return base[:MAX_FILE_NAME]


def file_name_for_page(url: str, title: str | None) -> str:
    """The name a scraped page is listed under: its title, else its URL."""
    name = normalise_text(title or "").replace("\n", " ")
    return (name or url)[:MAX_FILE_NAME]


def extension(file_name: str) -> str:
    _, dot, ext = file_name.rpartition(".")
    return ext.lower() if dot else ""

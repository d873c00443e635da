"""Small documents generated on the fly for knowledge-base tests (no binary fixtures in the repo)."""

from __future__ import annotations

import contextlib
import io
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("latin-1") + b")"


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal, valid PDF: one Helvetica text line per string, one page per list."""
    objects: list[bytes] = []
    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects.append(b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % len(pages))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for index, lines in enumerate(pages):
        content_id = page_ids[index] + 1
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
                       b" /Contents %d 0 R >>" % content_id)
        ops = [b"BT", b"/F1 12 Tf", b"14 TL", b"72 720 Td"]
        for line in lines:
            ops.append(_pdf_string(line) + b" Tj T*")
        ops.append(b"ET")
        stream = b"\n".join(ops)
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def make_blank_pdf(page_count: int) -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(page_count):
        writer.add_blank_page(width=72, height=72)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_zip(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def make_docx_bomb(expanded_bytes: int = 8 * 1024 * 1024) -> bytes:
    """A DOCX-shaped ZIP whose document.xml inflates about a thousandfold."""
    return make_zip({
        "[Content_Types].xml": b"<?xml version='1.0'?><Types/>",
        "word/document.xml": b"<w:document>" + b" " * expanded_bytes + b"</w:document>",
    })


HTML_PAGE = """<!DOCTYPE html>
<html><head><title>Returns &amp; refunds</title></head>
<body>
<nav>Home | Shop | Contact</nav>
<article>
<h1>Refund policy</h1>
<p>Customers can return any unused item within thirty days of delivery for a full refund.</p>
<p>Refunds are paid to the original payment method within five business days after we receive the parcel.</p>
</article>
<footer>Copyright Example Shop</footer>
</body></html>
"""

MARKDOWN = "# Opening hours\n\nThe clinic opens at **eight** in the morning on weekdays.\n\n- Saturday: ten to two\n"
CSV = "question,answer\nDo you deliver on Sundays?,No deliveries on Sundays\nIs parking free?,Yes for two hours\n"
TEXT = "Our support line answers calls about invoices, passwords and delivery tracking.\n"


@contextlib.asynccontextmanager
async def running_app(pool: Any, database_url: str, var_dir: Path, *overrides: Any, **settings: Any
                      ) -> AsyncIterator[Any]:
    """One app (and client) for a whole test module, lent by the run's ``pool`` (``AppPool``) over a container of
    its own: every test works in organizations of its own anyway. Rate limits are lifted."""
    from entrypoints.asgi_app import http_container
    from entrypoints.settings import Settings

    options: dict[str, Any] = {"allow_loopback_targets": True, "rate_limit_per_minute": 1_000_000,
                               "rate_limit_per_hour": 10_000_000}
    options.update(settings)
    config = Settings(database_url=database_url, var_dir=var_dir, secret_key="test-secret-key", **options)
    async with pool.serving(config, http_container(config, *overrides)) as api:
        yield api

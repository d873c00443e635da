"""Invoices as PDF documents, drawn with fpdf2 (pure Python, maintained): the seller, the organization billed,
the invoice's number, period, status and dates, one row per line (description, quantity, unit amount, amount) and
the total. Money is integer cents, printed as dollars and cents. fpdf2's built-in Helvetica covers Latin-1: any
other character of a name is printed as ``?``. Rendering is CPU work, so it runs in a worker thread."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from domain.billing import Invoice

SELLER = "Parley"


def _text(value: str) -> str:
    return value.encode("latin-1", "replace").decode("latin-1")


def _money(cents: int, currency: str) -> str:
    return f"{cents // 100:,}.{cents % 100:02d} {currency.upper()}"


def _day(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d") if at is not None else "-"


class FpdfInvoiceRenderer:
    """``InvoiceRenderer`` with fpdf2."""

    async def render(self, invoice: Invoice, organization_name: str) -> bytes:
        return await asyncio.to_thread(self.draw, invoice, organization_name)

    @staticmethod
    def draw(invoice: Invoice, organization_name: str) -> bytes:
        from fpdf import FPDF  # imported on the first invoice drawn, not at every process's start (about 0.3 s)

        pdf = FPDF(format="A4")
        pdf.set_title(_text(f"Invoice {invoice.number}"))
        pdf.set_author(SELLER)
        pdf.set_creator(SELLER)
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=18)
        pdf.cell(0, 10, _text(f"{SELLER} invoice {invoice.number}"), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=10)
        rows = [("Billed to", f"{organization_name} (organization {invoice.organization_id})"),
                ("Period", f"{invoice.period} ({_day(invoice.period_start)} to {_day(invoice.period_end)})"),
                ("Status", invoice.status),
                ("Issued", _day(invoice.created_at)),
                ("Paid", _day(invoice.paid_at))]
        for label, value in rows:
            pdf.cell(30, 6, _text(label))
            pdf.cell(0, 6, _text(value), new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)
        widths = (100, 20, 35, 35)
        pdf.set_font("Helvetica", style="B", size=10)
        for width, title, align in zip(widths, ("Description", "Quantity", "Unit amount", "Amount"),
                                       ("L", "R", "R", "R"), strict=True):
            pdf.cell(width, 7, title, border="B", align=align)
        pdf.ln()
        pdf.set_font("Helvetica", size=10)
        for line in invoice.lines:
            cells = (_text(line.description), str(line.quantity), _money(line.unit_amount, invoice.currency),
                     _money(line.amount, invoice.currency))
            y = pdf.get_y()
            measured: Any = pdf.multi_cell(widths[0], 6, cells[0], dry_run=True, output="HEIGHT")
            height = max(float(measured), 6.0)
            pdf.multi_cell(widths[0], 6, cells[0], new_x="RIGHT", new_y="TOP")
            for width, cell in zip(widths[1:], cells[1:], strict=True):
                pdf.cell(width, 6, cell, align="R")
            pdf.set_xy(pdf.l_margin, y + height)
        pdf.ln(2)
        pdf.set_font("Helvetica", style="B", size=11)
        pdf.cell(sum(widths[:3]), 8, "Total", border="T", align="R")
        pdf.cell(widths[3], 8, _money(invoice.total, invoice.currency), border="T", align="R")
        return bytes(pdf.output())

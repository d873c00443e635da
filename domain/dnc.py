"""Do-Not-Call lists: entries, CSV import parsing and the fail-closed screening rule.

Every list of an organization applies in every dial path. Numbers are compared in E.164 form only.
When screening cannot be completed (the store fails or does not answer in time), nothing is dialled:
the dial path raises :class:`DncUnavailable` instead of guessing.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime

from domain.errors import Unavailable

MAX_NUMBERS_PER_REQUEST = 10_000
MAX_CSV_ROWS = 100_000
REASON_MAX_LENGTH = 500
SCREEN_TIMEOUT_SECONDS = 5.0
_PHONE_HEADERS = ("phone_number", "phone", "number", "phone number", "telephone", "mobile")


class DncUnavailable(Unavailable):
    """Screening could not be completed, so nothing was dialled (503 dnc_unavailable)."""

    code = "dnc_unavailable"


@dataclass(frozen=True, slots=True)
class DncList:
    id: int | None
    organization_id: int
    name: str
    description: str | None
    created_at: datetime
    updated_at: datetime
    entry_count: int = 0


@dataclass(frozen=True, slots=True)
class DncEntry:
    list_id: int
    phone_number: str
    reason: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class CsvRow:
    line: int
    phone_number: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class CsvProblem:
    line: int
    value: str
    error: str


def parse_csv(text: str) -> tuple[list[CsvRow], list[CsvProblem]]:
    """Rows of a DNC CSV file. A header row naming a phone column (``phone_number``, ``phone``, ``number``...)
    selects that column and an optional ``reason`` column; without a header the first column is the number
    and the second, if any, the reason. Blank lines are skipped."""
    rows: list[CsvRow] = []
    problems: list[CsvProblem] = []
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    phone_col, reason_col = 0, 1
    first = True
    for record in reader:
        line = reader.line_num
        cells = [c.strip() for c in record]
        if not any(cells):
            continue
        if first:
            first = False
            lowered = [c.lower() for c in cells]
            header = next((i for i, c in enumerate(lowered) if c in _PHONE_HEADERS), None)
            if header is not None:
                phone_col = header
                reason_col = lowered.index("reason") if "reason" in lowered else -1
                continue
        if len(rows) + len(problems) >= MAX_CSV_ROWS:
            problems.append(CsvProblem(line, "", f"more than {MAX_CSV_ROWS} rows; the rest was ignored"))
            break
        value = cells[phone_col] if phone_col < len(cells) else ""
        if not value:
            problems.append(CsvProblem(line, "", "no phone number in this row"))
            continue
        reason = cells[reason_col] if 0 <= reason_col < len(cells) and cells[reason_col] else None
        rows.append(CsvRow(line, value, reason[:REASON_MAX_LENGTH] if reason else None))
    return rows, problems

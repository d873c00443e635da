"""What the pages of appointments, campaigns, webhooks and billing read from the URL: ids in the path (bounded as
in the API: beyond them is a 404 page) and the page number of a paged list."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request
from litestar.params import PathParameter

from domain.parsing import MAX_ID

PathId = Annotated[int, PathParameter(ge=1, le=MAX_ID)]
MAX_PAGE = 100_000


def page_number(request: Request[Any, Any, Any]) -> int:
    """``?page=N`` (from 1); anything else is the first page."""
    raw = request.query_params.get("page", "1")
    return int(raw) if raw.isascii() and raw.isdigit() and 0 < int(raw) <= MAX_PAGE else 1


def pages_of(total: int, per_page: int) -> int:
    return max(1, -(-total // per_page))

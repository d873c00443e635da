"""Whole ASGI responses for the code that answers before or around Litestar (the edge, the pipeline, the
dashboard's gate), typed as Litestar declares its messages."""

from __future__ import annotations

from collections.abc import Iterable

from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Message


def response_messages(status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> list[Message]:
    """The start of a response (status, headers) and its one body message."""
    start: HTTPResponseStartEvent = {"type": "http.response.start", "status": status, "headers": list(headers)}
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
    return [start, end]

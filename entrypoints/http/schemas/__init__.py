"""msgspec schemas: one Struct per shape (X, XCreate, XUpdate with UNSET fields for PATCH).

Bounds the domain also knows (lengths, ranges) are taken from its constants, never written again here."""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from domain.text import ONE_LINE_PATTERN

OneLine = Annotated[str, Meta(pattern=ONE_LINE_PATTERN)]
"""A one-line text (a name, a source, a subject, a label): no CR, LF, tab or other control character
(``domain.text``; 400 naming the field). Bounds go on top: ``Annotated[OneLine, Meta(max_length=200)]``.
Multi-line texts (a prompt, a body, notes, a description) are plain ``str``."""


def within(bounds: tuple[Any, Any], **meta: Any) -> Meta:
    """``Meta(ge=low, le=high)`` from one of the domain's inclusive ``(low, high)`` ranges."""
    low, high = bounds
    return Meta(ge=low, le=high, **meta)

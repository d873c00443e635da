"""msgspec schemas: one Struct per shape (X, XCreate, XUpdate with UNSET fields for PATCH).

Bounds the domain also knows (lengths, ranges) are taken from its constants, never written again here."""

from __future__ import annotations

from typing import Any

from msgspec import Meta


def within(bounds: tuple[Any, Any], **meta: Any) -> Meta:
    """``Meta(ge=low, le=high)`` from one of the domain's inclusive ``(low, high)`` ranges."""
    low, high = bounds
    return Meta(ge=low, le=high, **meta)

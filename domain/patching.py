"""PATCH as JSON merge patch (RFC 7396), at every depth.

A patch document is what the client sent, as plain values: members it left out are absent, ``None`` is
JSON ``null``. :func:`merge_patch` is RFC 7396 on JSON values (``null`` removes a member);
:func:`apply_patch` is the same merge onto a frozen dataclass (a resource), where every field exists, so
``null`` clears a (nullable) field, a nested dataclass is merged field by field and a dict field (metadata,
settings...) is merged with :func:`merge_patch`. Lists and scalars are replaced. Whether ``null`` is
acceptable for a field is the edge's business (its patch schema): this module only merges.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, TypeVar


class Dataclass(Protocol):
    """Any dataclass instance (what ``dataclasses.replace`` takes)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


T = TypeVar("T", bound=Dataclass)

MergePatch = Mapping[str, Any]
"""A PATCH document as the client sent it (RFC 7396): members left out are absent, ``None`` is JSON ``null``.
Use cases that update a resource take one of these (validated at the edge by the resource's patch schema)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 MergePatch(target, patch), without modifying either."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for name, value in patch.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = merge_patch(merged.get(name), value)
    return merged


def apply_patch(resource: T, patch: MergePatch) -> T:
    """``resource`` (a frozen dataclass) with ``patch`` merged in; the same object when nothing changes."""
    changes: dict[str, Any] = {}
    for name, value in patch.items():
        current = getattr(resource, name)
        if isinstance(value, Mapping) and dataclasses.is_dataclass(current) and not isinstance(current, type):
            new = apply_patch(current, value)
        elif isinstance(value, Mapping) and isinstance(current, Mapping):
            new = merge_patch(current, value)
        else:
            new = value
        if new != current:
            changes[name] = new
    return dataclasses.replace(resource, **changes) if changes else resource

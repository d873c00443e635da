"""Ids of stored entities.

An entity's ``id`` is ``None`` until a repository stores it and gives it one. Code that works on a stored entity
(a row read back, an entity just added) narrows the id with ``persisted``: a missing id there is a bug, and it is
reported as one rather than patched into an id that belongs to nothing.
"""

from __future__ import annotations


class NotPersisted(LookupError):
    """An entity that was never stored was asked for its id (a programming error, never a client's)."""


def persisted(entity_id: int | None) -> int:
    """The id of a stored entity; raises NotPersisted if it has none."""
    if entity_id is None:
        raise NotPersisted("an entity that was never stored has no id")
    return entity_id

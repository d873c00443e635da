"""Domain events: facts recorded by use cases and written to the outbox with their change."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class DomainEvent:
    organization_id: int
    type: str
    data: dict[str, Any] = field(default_factory=dict)

"""Cloud-connectivity status: how healthy each measured component is, and the overall status (the worst)."""

from __future__ import annotations

import enum
from collections.abc import Iterable


class ComponentStatus(enum.StrEnum):
    OPERATIONAL = "operational"
    DEGRADED = "degraded"
    DOWN = "down"


_RANK = {ComponentStatus.OPERATIONAL: 0, ComponentStatus.DEGRADED: 1, ComponentStatus.DOWN: 2}


def worst(statuses: Iterable[ComponentStatus]) -> ComponentStatus:
    """The worst of ``statuses`` (operational when there are none)."""
    return max(statuses, key=_RANK.__getitem__, default=ComponentStatus.OPERATIONAL)


def by_age(age_seconds: float | None, degraded_after: float, down_after: float | None) -> ComponentStatus:
    """Down when nothing was seen (``None``) or it is older than ``down_after``; degraded past ``degraded_after``."""
    if age_seconds is None or (down_after is not None and age_seconds > down_after):
        return ComponentStatus.DOWN
    if age_seconds > degraded_after:
        return ComponentStatus.DEGRADED
    return ComponentStatus.OPERATIONAL

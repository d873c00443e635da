"""A broken unique constraint is a domain error on every backend, through the one table in
``adapters/sql/constraints.py``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.sql.constraints import CONSTRAINT_ERRORS
from application.ports.webhooks import DeliveryRepository, SubscriptionRepository
from domain.errors import Conflict
from domain.webhooks import Delivery, Subscription
from tests.support.apps import new_organization


def test_every_listed_constraint_exists_on_its_table() -> None:
    for name, (table, _) in CONSTRAINT_ERRORS.items():
        assert name in {item.name for item in [*table.constraints, *table.indexes]}, name


async def test_a_taken_delivery_webhook_id_is_a_conflict(container: Any) -> None:
    at = datetime(2001, 7, 1, tzinfo=UTC)
    org = await new_organization(container)
    async with container() as r:
        sub = await (await r.get(SubscriptionRepository)).add(Subscription(
            None, org, "hook", "https://example.com/hook", ("call.ended",), status="paused", sealed_secret="s",
            created_at=at, updated_at=at))
        repo = await r.get(DeliveryRepository)
        delivery = Delivery(None, org, sub.id or 0, "call.ended", {}, at, f"msg_constraint_{org}",
                            next_attempt_at=None, status="cancelled", created_at=at, updated_at=at)
        await repo.add(delivery)
        with pytest.raises(Conflict, match="this delivery exists already"):
            await repo.add(delivery)

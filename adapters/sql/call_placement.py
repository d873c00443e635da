"""What placing a call asks of the organization's stores, read in one statement (``CallPlacementReads``).

``PlaceCall`` asks, one after another, for the organization (its dialing policy and plan), its billing account
(the standing), whether the destination is on any of its Do-Not-Call lists, the telephony provider a new call
takes and the caller number of the agent: five round trips on PostgreSQL. ``read_ahead`` reads them in one and
leaves each answer in the unit of work for the repository that will be asked (``SqlUnitOfWork.read_ahead``: the
first read that asks takes it; a commit or rollback drops what is left). The repositories decide nothing new: an
answer this statement cannot give as the repository would (the organization's first call, which creates its
built-in provider; a destination that is listed, whose lists the screener names) is not left, and the repository
reads it itself.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from adapters.sql.accounts import ORG_COLUMNS, org_from_row
from adapters.sql.billing import billing_account
from adapters.sql.billing_tables import billing_accounts
from adapters.sql.calls_tables import dnc_entries, telephony_numbers, telephony_providers
from adapters.sql.tables import organizations
from adapters.sql.telephony import OUTBOUND_NUMBER, PROVIDER_FOR_CALL, row_to_number, row_to_provider
from adapters.sql.uow import SqlUnitOfWork
from domain.telephony import BUILTIN_SIMULATOR

_provider = telephony_providers.alias("provider")
_caller = telephony_numbers.alias("caller")
_PARTS = {"b_": billing_accounts, "p_": _provider, "n_": _caller}


def _labelled(prefix: str, table: Any) -> list[Any]:
    return [column.label(f"{prefix}{column.name}") for column in table.c]


def _part(row: Any, prefix: str) -> SimpleNamespace | None:
    """One table's columns of the row, by their own names (None: the outer join found no row)."""
    table = _PARTS[prefix]
    if getattr(row, f"{prefix}{next(iter(table.primary_key)).name}") is None:
        return None
    return SimpleNamespace(**{column.name: getattr(row, f"{prefix}{column.name}") for column in table.c})


_tp, _dnc = telephony_providers, dnc_entries
# the organization (not deleted), its billing account, the provider of a new call and the agent's caller number
# (each the first row of the repository's own query), whether the built-in provider exists, whether the destination
# is listed; built once with bound parameters
_READ_AHEAD = (
    sa.select(
        *ORG_COLUMNS, *_labelled("b_", billing_accounts), *_labelled("p_", _provider), *_labelled("n_", _caller),
        sa.exists().where(_tp.c.organization_id == sa.bindparam("org"), _tp.c.builtin_key == BUILTIN_SIMULATOR)
        .label("has_builtin"),
        sa.exists().where(_dnc.c.organization_id == sa.bindparam("org"),
                          _dnc.c.phone_number == sa.bindparam("destination")).label("listed"),
    )
    .select_from(
        organizations
        .outerjoin(billing_accounts, billing_accounts.c.organization_id == organizations.c.id)
        .outerjoin(_provider, _provider.c.id == PROVIDER_FOR_CALL.with_only_columns(_tp.c.id).limit(1)
                   .scalar_subquery())
        .outerjoin(_caller, _caller.c.id == OUTBOUND_NUMBER.with_only_columns(telephony_numbers.c.id)
                   .scalar_subquery()))
    .where(organizations.c.id == sa.bindparam("org"), organizations.c.deleted_at.is_(None))
)


class SqlCallPlacementReads:
    def __init__(self, uow: SqlUnitOfWork) -> None:
        self.uow = uow

    async def read_ahead(self, organization_id: int, agent_id: int, destination: str) -> None:
        conn = await self.uow.connection()
        row = (await conn.execute(_READ_AHEAD, {"org": organization_id, "agent_id": agent_id,
                                                "destination": destination})).first()
        if row is None:  # no such organization: every repository answers for itself
            return
        self.uow.read_once["organization", organization_id] = org_from_row(row)
        ahead = self.uow.read_ahead
        ahead["billing_account", organization_id] = billing_account(organization_id, _part(row, "b_"))
        provider = _part(row, "p_")
        if row.has_builtin and provider is not None:  # else the first call's provider is made by the repository
            ahead["call_provider", organization_id] = row_to_provider(provider)
        caller = _part(row, "n_")
        ahead["outbound_number", organization_id, agent_id] = (row_to_number(caller) if caller else None,)
        if not row.listed:
            ahead["dnc_unlisted", organization_id, destination] = True

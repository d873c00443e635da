"""Knowledge in the call: each caller turn's best passages from the agent's knowledge bases (the knowledge bases'
full-text search, in a unit of work of its own), for the model's context."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from application.ports.knowledge import KnowledgeSearch, SearchHit
from application.ports.platform import Unit, Units
from domain.knowledge import search_terms

log = logging.getLogger("parley.conversation")
PASSAGE_MAX_CHARS = 1200


class Passages(Protocol):
    async def retrieve(self, organization_id: int, knowledge_base_ids: Sequence[int], text: str,
                       limit: int) -> list[SearchHit]: ...


class KnowledgePassages:
    """:class:`Passages` over the knowledge-base search. A failing search is logged and finds nothing: the turn is
    answered without passages rather than not at all."""

    def __init__(self, units: Units) -> None:
        self.units = units

    async def retrieve(self, organization_id: int, knowledge_base_ids: Sequence[int], text: str,
                       limit: int) -> list[SearchHit]:
        terms = search_terms(text)
        if not terms or not knowledge_base_ids:
            return []

        async def work(unit: Unit) -> list[SearchHit]:
            return await (await unit.get(KnowledgeSearch)).search(organization_id, knowledge_base_ids, terms, limit)

        try:
            return await self.units.run(work)
        except Exception:
            log.exception("knowledge search failed for organization %s", organization_id)
            return []


def context_block(hits: Sequence[SearchHit]) -> str:
    """The passages as the model reads them."""
    lines = ["Passages from the knowledge base that may answer the caller (use them; do not invent facts):"]
    for number, hit in enumerate(hits, 1):
        text = " ".join(hit.text.split())
        lines.append(f"[{number}] {text[:PASSAGE_MAX_CHARS]}")
    return "\n".join(lines)

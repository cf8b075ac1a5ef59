"""The reranker as a stage of another retrieval service (graph-rag, lazy-rag, kg-query): build the
request from what the service retrieved, call the reranker (over the bus, through the service's
sources) and read back the new order (bus-free)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from schemas.graph_rag import SeedEntity
from schemas.reranker import RerankItem, RerankRequest, RerankResponse
from schemas.retrieval import RerankerChoice
from schemas.tenant import Tenant


class Reranks(Protocol):
    """A service's sources that can call the reranker."""

    async def rerank(self, req: RerankRequest) -> RerankResponse:
        """Rerank results (one call to the `reranker` service)."""
        ...


@dataclass
class Reranked:
    """The new order, as (position in the input, combined score). What reranking cost the
    stores is in the caller's counts (the reranker reports it with its response)."""

    order: list[tuple[int, float]]


def rank_scores(scores: Sequence[float | None]) -> list[float]:
    """The scores as given when every one is set; else scores by rank (1 for the first, then
    falling linearly), for lists merged from sources whose scores do not compare."""
    if all(s is not None for s in scores):
        return [float(s) for s in scores]  # type: ignore[arg-type]
    n = len(scores)
    return [(n - i) / n for i in range(n)]


async def rerank_stage(
    sources: Reranks,
    choice: RerankerChoice,
    t: Tenant,
    query: str,
    vector: list[float] | None,
    items: list[RerankItem],
    seeds: Sequence[SeedEntity] | None,
) -> Reranked | None:
    """Rerank `items` with strategy `choice` (None: `none`, or nothing to rerank)."""
    if choice == "none" or not items:
        return None
    req = RerankRequest(user=t.user, collection=t.collection, scope=t.scope, query=query, results=items,
                        strategy=choice, vector=vector, seeds=list(seeds) if seeds is not None else None)  # fmt: skip
    res = await sources.rerank(req)
    return Reranked([(r.index, r.combined_score) for r in res.results])

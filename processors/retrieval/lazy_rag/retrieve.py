"""How lazy-rag finds the context of a question (bus-free).

1. The question's vector; the best chunks and the entities the question names or is nearest to
   — one call (on a server holding both, one store round trip). The documents service ranks the
   chunks by graphrank (dense + BM25 + question-aware hops over the concept graph, see
   algorithms/passage_rank), which finds the bridge passage of a multi-hop question.
   With `bridge_seeds`, a follow-up round (algorithms/bridges): the names the best chunks give
   that the question does not say, each searched with what the question still asks (one
   embeddings call, one search call for them all), fused into the ranking. With `decompose_hops`,
   the question's own hops (algorithms/hops, lazy_rag/chain), searched innermost first while the
   first search runs, the bridge each finds fed into the next, fused too.
2. `max_hops` levels of expansion over chunk-entity links (algorithms/expansion; one call, one
   store round trip for all the levels): the entities the frontier chunks mention and the chunks
   that mention the frontier entities; the next frontier is the best `max_entities` entities, by
   how strongly the retrieved chunks name them.
3. Personalised PageRank over that neighbourhood (chunks, entities, their links), restarting at
   the best chunks and the question's entities: it ranks the entities.
4. With a `reranker`, the best `rerank-depth` chunks reordered by the reranker (one call).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from processors.algorithms.hops import decompose
from processors.algorithms.pagerank import WeightedGraph, normalise, personalized_pagerank
from processors.retrieval.common import Stopwatch
from processors.retrieval.lazy_rag.chain import HopRankings, follow_bridges, follow_hops
from processors.retrieval.lazy_rag.sources import LazySources
from processors.retrieval.reranker.stage import rerank_stage
from schemas.documents import Chunk, Mention
from schemas.graph_rag import SeedEntity
from schemas.lazy_rag import LazyRagParams, LazyRagRequest
from schemas.reranker import RerankItem
from schemas.retrieval import RerankerChoice
from schemas.tenant import Tenant


class LazyRagSettings(BaseModel):
    """lazy-rag's flow parameters (a request may override the `LazyRagParams` names)."""

    max_hops: int = Field(default=2, ge=0, le=4)
    max_entities: int = Field(default=50, ge=1)
    chunk_limit: int = Field(default=10, ge=1)
    use_communities: bool = True
    timeout_s: float = Field(default=60.0, gt=0)
    stage_timeout_s: float = Field(default=30.0, gt=0)
    search_depth: int = Field(default=30, ge=1)  # ranked chunks that seed the expansion
    seed_entities: int = Field(default=10, ge=1)  # entities from the question's vector and names
    per_entity: int = Field(default=20, ge=1)  # chunks read per expanded entity
    chunk_seed_weight: float = Field(default=0.5, ge=0, le=1)  # restart mass on chunks (the rest: entities)
    reranker: RerankerChoice = "none"  # rerank the best chunks with this reranker strategy
    rerank_depth: int = Field(default=30, ge=1, le=1000)  # chunks the reranker reorders
    # best chunks whose names are followed (0: no follow-up round); 2: chosen on the tuning halves
    bridge_seeds: int = Field(default=2, ge=0, le=10)
    bridge_names: int = Field(default=4, ge=1, le=10)  # names followed per seed chunk
    bridge_depth: int = Field(default=5, ge=1, le=50)  # chunks each follow-up search returns
    # the bridge names of a chunk come from its this many best-matching sentences (0: all of them)
    bridge_sentences: int = Field(default=0, ge=0, le=10)
    # the question's hops searched one by one, the bridge of each fed into the next (0: off)
    decompose_hops: int = Field(default=0, ge=0, le=4)
    hop_seeds: int = Field(default=1, ge=1, le=5)  # chunks of a hop whose names the next hop follows
    hop_names: int = Field(default=2, ge=1, le=10)  # names followed per such chunk
    first_hop_weight: float = Field(default=0.25, ge=0, le=2)  # the first hop's own ranking's weight in the fusion
    hop_weight: float = Field(default=0.25, ge=0, le=2)  # a later hop's, from the best bridge name
    # the follow-up round asks the question's second hop with each name, not all it still asks (off)
    bridge_next_hop: bool = False

    def for_request(self, req: LazyRagRequest) -> LazyRagSettings:
        """These settings with the request's overrides."""
        return self.model_copy(update=req.model_dump(include=set(LazyRagParams.model_fields), exclude_none=True))


@dataclass
class Neighbourhood:
    """What retrieval found, ranked, and its stages' times and store usage (`watch`)."""

    chunks: list[Chunk]  # ranked, with texts
    entities: list[tuple[str, float]]  # ranked by mass
    seeds: list[SeedEntity]
    mentions: list[Mention] = field(default_factory=list)
    watch: Stopwatch = field(default_factory=Stopwatch)


async def retrieve(sources: LazySources, t: Tenant, query: str, s: LazyRagSettings) -> Neighbourhood:
    """The ranked neighbourhood of `query` (see the module docstring)."""
    watch = Stopwatch()
    # the question's hops need only its text: searched while the question's own search runs
    hops = asyncio.ensure_future(_hop_rankings(sources, t, query, s)) if s.decompose_hops else None
    try:
        vector = await sources.embed(query)
        watch.lap("embed")
        depth = max(s.search_depth, s.chunk_limit)
        hits, seeds = await sources.search_and_seed(t, vector, query, depth, s.seed_entities)
        watch.lap("search")
        hop_rankings = await hops if hops else HopRankings()
    finally:
        if hops and not hops.done():  # the search failed: the hops are no longer wanted
            hops.cancel()
    if s.bridge_seeds or hop_rankings.rankings:
        next_hop = _next_hop(query) if s.bridge_next_hop else None
        hits = await follow_bridges(sources, t, query, hits, s.bridge_seeds, s.bridge_names, s.bridge_depth,
                                    hop_rankings, s.bridge_sentences, next_hop)  # fmt: skip
        watch.lap("bridges")
    known = {c.id: c for c in hits}
    ranked_ids = [c.id for c in hits]
    mentions = await sources.expand(t, [e.id for e in seeds], ranked_ids, s.per_entity, s.max_hops, s.max_entities)
    watch.lap("expand")
    in_scope = {m.entity for m in mentions}
    seeds = [e for e in seeds if t.scope is None or e.id in in_scope]  # a seed outside the scope names nothing in it
    ranked_entities = _rank_entities(hits, seeds, mentions, s)
    watch.lap("rank")
    ranked = [(c.id, c.score or 0.0) for c in hits]
    top = ranked[: s.chunk_limit]
    if s.reranker != "none":
        depth = ranked[: max(s.chunk_limit, s.rerank_depth)]
        items = [RerankItem(id=cid, kind="chunk", score=score) for cid, score in depth]
        reranked = await rerank_stage(sources, s.reranker, t, query, vector, items, seeds)
        if reranked:
            top = [(depth[i][0], score) for i, score in reranked.order[: s.chunk_limit]]
            watch.lap("rerank")
    missing = [cid for cid, _ in top if cid not in known]
    if missing:
        known.update({c.id: c for c in await sources.chunks(t, missing)})
    watch.lap("chunks")
    chunks = [known[cid].model_copy(update={"score": score}) for cid, score in top if cid in known]
    return Neighbourhood(chunks, ranked_entities[: s.max_entities], seeds, mentions, watch)


def _next_hop(query: str) -> str | None:
    """The hop after the first of `query`, when it chains (algorithms/hops)."""
    hops = decompose(query)
    return hops[1] if len(hops) > 1 else None


async def _hop_rankings(sources: LazySources, t: Tenant, query: str, s: LazyRagSettings) -> HopRankings:
    return await follow_hops(sources, t, query, s.decompose_hops, s.hop_seeds, s.hop_names, s.bridge_depth,
                             (s.first_hop_weight, s.hop_weight), s.bridge_sentences)  # fmt: skip


def _rank_entities(
    hits: Sequence[Chunk], seeds: Sequence[SeedEntity], mentions: Sequence[Mention], s: LazyRagSettings
) -> list[tuple[str, float]]:
    """Entities ranked by personalised PageRank over the neighbourhood."""
    df = Counter(m.entity for m in mentions)
    g = WeightedGraph()
    for c in hits:
        g.node("c:" + c.id)
    for m in mentions:
        # a rarer entity is a stronger link: an entity every chunk names says little about any
        g.link("c:" + m.chunk_id, "e:" + m.entity, math.log1p(m.count) / math.log(2 + df[m.entity]))
    chunk_seed = normalise(("c:" + c.id, 1.0 / (1 + i)) for i, c in enumerate(hits))
    entity_seed = normalise(("e:" + e.id, 1.0 if e.lexical else max(e.score, 0.0) ** 2) for e in seeds)
    w = s.chunk_seed_weight if entity_seed else 1.0
    restart = {k: w * v for k, v in chunk_seed.items()}
    for k, v in entity_seed.items():
        restart[k] = restart.get(k, 0.0) + (1 - w) * v
    mass = personalized_pagerank(g, restart)
    return sorted(((k[2:], v) for k, v in mass.items() if k.startswith("e:")), key=lambda kv: (-kv[1], kv[0]))

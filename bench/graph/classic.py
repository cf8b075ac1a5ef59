"""The classic GraphRAG retrieval, faithfully: the baseline every benchmark ratio is taken against.

This is the algorithm the GraphRAG performance spec calls "current" (TrustGraph's
`graph_rag.py`): a NEW query object with an EMPTY label cache per request; `follow_edges`
recursive, issuing three separate pattern queries (s=ent, p=ent, o=ent, each limited to
`triple_limit`) for every entity at every level, with no visited set; the size check only
at the entry of `follow_edges`; then every non-label edge of the whole subgraph labelled
one IRI at a time (`maybe_label`, memoised within the request only) before truncating to
`max_subgraph_size`. Every store call goes through the same `TripleStore.pattern()` of the
same store kgflow uses, and every one is counted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from processors.base.client import RequestResponseClient
from processors.models.embeddings.model import Embedder
from processors.stores.protocol import EntityIndex, TripleStore
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.triples import PatternQuery, TriplesResponse

Edge = tuple[str, str, str]


@dataclass
class ClassicLimits:
    """The classic defaults (TrustGraph's): 50 entities, 30 triples, 150 triples, 2 levels."""

    entity_limit: int = 50
    triple_limit: int = 30
    max_subgraph_size: int = 150
    max_path_length: int = 2


@dataclass
class ClassicResult:
    """What one classic query found and cost."""

    triples: list[Edge]
    seeds: list[str]
    store_calls: int
    traversal_calls: int
    label_calls: int
    elapsed_ms: float
    stage_ms: dict[str, float] = field(default_factory=dict)


class ClassicQuery:
    """One request's state, exactly as short-lived as the original (created per request)."""

    def __init__(self, store: TripleStore, user: str, collection: str, limits: ClassicLimits) -> None:
        self.store = store
        self.user = user
        self.collection = collection
        self.limits = limits
        self.label_cache: dict[str, str] = {}  # empty on every request
        self.traversal_calls = 0
        self.label_calls = 0

    async def _query(self, s: str | None, p: str | None, o: str | None, limit: int) -> list[Edge]:
        res = await self.store.pattern(
            Tenant(self.user, self.collection),
            Term.iri(s) if s is not None else None,
            Term.iri(p) if p is not None else None,
            Term.iri(o) if o is not None else None,
            limit,
        )
        return [(t.s.value, t.p.value, t.o.value) for t in res]

    async def maybe_label(self, e: str) -> str:
        """The label of `e` (one store call per IRI not yet seen in this request)."""
        if e in self.label_cache:
            return self.label_cache[e]
        self.label_calls += 1
        res = await self._query(e, RDFS_LABEL, None, 1)
        self.label_cache[e] = res[0][2] if res else e
        return self.label_cache[e]

    async def follow_edges(self, ent: str, subgraph: set[Edge], path_length: int) -> None:
        """Three queries for `ent`, recursing from subjects and objects (no visited set)."""
        if path_length <= 0:
            return
        if len(subgraph) >= self.limits.max_subgraph_size:
            return
        limit = self.limits.triple_limit
        self.traversal_calls += 1
        for s, p, o in await self._query(ent, None, None, limit):
            subgraph.add((s, p, o))
            if path_length > 1:
                await self.follow_edges(o, subgraph, path_length - 1)
        self.traversal_calls += 1
        for s, p, o in await self._query(None, ent, None, limit):
            subgraph.add((s, p, o))
        self.traversal_calls += 1
        for s, p, o in await self._query(None, None, ent, limit):
            subgraph.add((s, p, o))
            if path_length > 1:
                await self.follow_edges(s, subgraph, path_length - 1)

    async def get_subgraph(self, entities: Sequence[str]) -> list[Edge]:
        """Follow edges from every seed entity in turn."""
        subgraph: set[Edge] = set()
        for ent in entities:
            await self.follow_edges(ent, subgraph, self.limits.max_path_length)
        return list(subgraph)

    async def get_labelgraph(self, entities: Sequence[str]) -> list[Edge]:
        """Label every non-label edge, one IRI at a time, then truncate."""
        sg2: list[Edge] = []
        for s, p, o in await self.get_subgraph(entities):
            if p == RDFS_LABEL:
                continue
            sg2.append((await self.maybe_label(s), await self.maybe_label(p), await self.maybe_label(o)))
        return sg2[: self.limits.max_subgraph_size]


async def classic_retrieve(
    store: TripleStore,
    index: EntityIndex,
    embedder: Embedder,
    user: str,
    collection: str,
    question: str,
    limits: ClassicLimits | None = None,
) -> ClassicResult:
    """One classic request: embed, the same entity search kgflow uses (one call), classic traversal + labels."""
    limits = limits or ClassicLimits()
    began = t = time.perf_counter()
    vector = (await embedder.embed([question]))[0]
    stage = {"embed": (time.perf_counter() - t) * 1000}
    t = time.perf_counter()
    seeds = [h.iri for h in await index.search(Tenant(user, collection), vector, question, limits.entity_limit)]
    stage["seeds"] = (time.perf_counter() - t) * 1000
    q = ClassicQuery(store, user, collection, limits)  # new instance, empty cache, per request
    t = time.perf_counter()
    subgraph = await q.get_subgraph(seeds)
    stage["traversal"] = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    triples: list[Edge] = []
    for s, p, o in subgraph:
        if p != RDFS_LABEL:
            triples.append((await q.maybe_label(s), await q.maybe_label(p), await q.maybe_label(o)))
    stage["labels"] = (time.perf_counter() - t) * 1000
    return ClassicResult(
        triples=triples[: limits.max_subgraph_size],
        seeds=seeds,
        store_calls=1 + q.traversal_calls + q.label_calls,
        traversal_calls=q.traversal_calls,
        label_calls=q.label_calls,
        elapsed_ms=(time.perf_counter() - began) * 1000,
        stage_ms={k: round(v, 3) for k, v in stage.items()},
    )


class BusPatterns:
    """`pattern()` as the original issues it: one request to the triples service per call.

    Same store behind the triples processor; adds what a store call costs in the deployed
    architecture (a request/response over the bus) — here the in-process bus, so still a
    lower bound of a Pulsar round trip.
    """

    def __init__(self, client: RequestResponseClient[TriplesResponse]) -> None:
        self.client = client

    async def pattern(
        self, user: str, collection: str, s: Term | None, p: Term | None, o: Term | None, limit: int
    ) -> list[Triple]:
        """One PatternQuery round trip."""
        res = await self.client.request(PatternQuery(user=user, collection=collection, s=s, p=p, o=o, limit=limit))
        return [Triple(s=t.s, p=t.p, o=t.o) for t in res.triples]

"""Reranker: reorder retrieved results by graph signals (bus-free). The strategies and the formula
are in `schemas.reranker`.

1. Concurrently: the results' entities (an entity is itself, a triple its `entity_ids`, a chunk
   the entities it mentions: one documents call for all chunks), with each entity's episodes in
   the window in that same call (episode, hybrid); the question's entities (given, chosen from
   the caller's seeds, or one entity search) (distance, hybrid); the stored vectors'
   similarities (semantic).
2. distance, hybrid: breadth-first search from the question's entities, one store round trip
   per level for the whole frontier, until every result has an entity reached or `max-distance`
   (one request: the triples service runs the search beside the store).
3. Signals fused per result; a stable sort keeps ties in input order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from pydantic import BaseModel, Field

from processors.algorithms.bfs import DistanceSearch
from processors.retrieval.common import Stopwatch, within
from processors.retrieval.reranker.signals import (
    Signals,
    closest_entity,
    distance_score,
    fuse,
    most_episodes,
    normalised,
    question_entities,
)
from processors.retrieval.reranker.sources import RerankSources
from schemas.reranker import (
    GraphContext,
    RerankedResult,
    RerankerParams,
    RerankItem,
    RerankRequest,
    RerankResponse,
    RerankWeights,
    Strategy,
)
from schemas.retrieval import RetrievalStats
from schemas.tenant import Tenant
from schemas.triples import MAX_BATCH

NO_QUESTION_ENTITIES = (
    "no question entities: the question names no entity of this collection (or scope) and none is "
    "similar enough; original scores kept"
)
NO_ENTITIES = "no entities of this user and collection (or scope)"
NO_VECTOR = "no stored vector and no text"


class RerankerSettings(BaseModel):
    """The reranker's flow parameters (a request may override the `RerankerParams` names)."""

    strategy: Strategy = "hybrid"
    weights: RerankWeights = Field(default_factory=RerankWeights)
    window_days: float = Field(default=30.0, gt=0)
    max_distance: int = Field(default=3, ge=1, le=8)
    seed_entities: int = Field(default=10, ge=1, le=1000)  # entities the seed search returns
    vector_seeds: int = Field(default=3, ge=0)  # question entities by vector when the question names none
    seed_min_similarity: float = Field(default=0.5, ge=-1.0, le=1.0)  # ... and only this similar
    edges_per_entity: int = Field(default=30, ge=1, le=10_000)  # read per frontier entity and direction
    max_frontier: int = Field(default=MAX_BATCH, ge=1, le=MAX_BATCH)  # entities per BFS round trip
    timeout_s: float = Field(default=30.0, gt=0)
    stage_timeout_s: float = Field(default=30.0, gt=0)

    def for_request(self, req: RerankRequest) -> RerankerSettings:
        """These settings with the request's overrides."""
        update = {k: getattr(req, k) for k in RerankerParams.model_fields if getattr(req, k) is not None}
        return self.model_copy(update=update)


@dataclass
class _Found:
    """What stage 1 found."""

    entities: list[list[str]]  # per result
    episodes: dict[str, int]
    question: list[str]
    semantic: list[float | None]


class Reranker:
    """One long-lived instance per flow; a request is a call on it."""

    def __init__(self, sources: RerankSources, settings: RerankerSettings) -> None:
        self.sources = sources
        self.settings = settings

    async def run(self, req: RerankRequest) -> RerankResponse:
        """Rerank within the time budget."""
        s = self.settings.for_request(req)
        return await within(s.timeout_s, "reranker", self._run(req, s))

    async def _run(self, req: RerankRequest, s: RerankerSettings) -> RerankResponse:
        began, watch = time.perf_counter(), Stopwatch()
        t = Tenant(req.user, req.collection, req.scope)
        found = await self._gather(req, s, t, watch)
        hops: dict[str, int] = {}
        targets = [g for g in found.entities if g]
        if s.strategy in ("distance", "hybrid") and found.question and targets:
            search = DistanceSearch(found.question, targets, s.max_distance, s.edges_per_entity, s.max_frontier)
            dist = await self.sources.distances(t, search)
            hops = dist.hops
            watch.lap("distance")
        results = score(req.results, found, hops, s)
        watch.lap("score")
        stats = RetrievalStats(elapsed_ms=round((time.perf_counter() - began) * 1000, 3))
        watch.report(stats)
        return RerankResponse(strategy=s.strategy, results=results, question_entities=found.question, stats=stats)

    async def _gather(self, req: RerankRequest, s: RerankerSettings, t: Tenant, watch: Stopwatch) -> _Found:
        """Stage 1: the results' entities and episodes, the question's entities, similarities."""
        episodes, distance, semantic = (
            s.strategy in ("episode", "hybrid"),
            s.strategy in ("distance", "hybrid"),
            s.strategy == "semantic",
        )
        search = distance and req.question_entities is None and req.seeds is None
        vector = req.vector
        if vector is None and (semantic or search):
            vector = await self.sources.embed(req.query)
            watch.lap("embed")
        given = [_given_entities(it) for it in req.results]
        lookup = list(dict.fromkeys(it.id for it, g in zip(req.results, given, strict=True) if g is None))
        explicit = list(dict.fromkeys(e for g in given if g for e in g))
        until = _aware(req.as_of) if req.as_of else datetime.now(UTC)
        since = _window_start(until, s.window_days)

        async def mentions() -> tuple[dict[str, list[str]], dict[str, int]]:
            window = (since, until) if episodes else None
            if (episodes and (explicit or lookup)) or (distance and lookup):
                return await self.sources.episodes(t, explicit if episodes else [], lookup, window)
            return {}, {}

        async def question() -> list[str]:
            if not distance:
                return []
            if req.question_entities is not None:
                return list(dict.fromkeys(req.question_entities))
            if req.seeds is not None:
                return question_entities(req.seeds, s.vector_seeds, s.seed_min_similarity)
            assert vector is not None
            seeds = await self.sources.seeds(t, vector, req.query, s.seed_entities)
            return question_entities(seeds, s.vector_seeds, s.seed_min_similarity)

        async def similarities() -> list[float | None]:
            if not semantic:
                return [None] * len(req.results)
            assert vector is not None
            return await self._similarities(t, req.results, given, vector)

        (links, counts), qents, sims = await asyncio.gather(mentions(), question(), similarities())
        watch.lap("lookup")
        entities = [g if g is not None else links.get(it.id, []) for it, g in zip(req.results, given, strict=True)]
        return _Found([list(dict.fromkeys(e)) for e in entities], counts, qents, sims)

    async def _similarities(
        self, t: Tenant, items: Sequence[RerankItem], given: Sequence[list[str] | None], vector: list[float]
    ) -> list[float | None]:
        """Cosine of the question to each result's stored vector: a chunk's, an entity's label
        vector, a triple's entities' label vectors averaged; only results without a stored vector
        have their `text` embedded (one model call)."""
        chunk_ids = list(dict.fromkeys(it.id for it in items if it.kind == "chunk"))
        iris = [it.id for it in items if it.kind == "entity"]
        iris += [e for it, g in zip(items, given, strict=True) if it.kind == "triple" and g for e in g]
        iris = list(dict.fromkeys(iris))
        chunk_sims, entity_sims = await asyncio.gather(
            self.sources.chunk_similarities(t, vector, chunk_ids) if chunk_ids else _nothing(),
            self.sources.entity_similarities(t, vector, iris) if iris else _nothing(),
        )
        out: list[float | None] = []
        for it, g in zip(items, given, strict=True):
            if it.kind == "chunk":
                out.append(chunk_sims.get(it.id))
            elif it.kind == "entity":
                out.append(entity_sims.get(it.id))
            else:
                known = [entity_sims[e] for e in g or () if e in entity_sims]
                out.append(sum(known) / len(known) if known else None)
        todo = [i for i, (it, v) in enumerate(zip(items, out, strict=True)) if v is None and it.text]
        if todo:
            vecs = np.asarray(await self.sources.embed_texts([items[i].text or "" for i in todo]), dtype=np.float32)
            q = np.asarray(vector, dtype=np.float32)
            norms = np.linalg.norm(vecs, axis=1) * (np.linalg.norm(q) or 1.0)
            for i, c in zip(todo, (vecs @ q / np.where(norms == 0, 1.0, norms)).tolist(), strict=True):
                out[i] = c
        return out


def score(
    items: Sequence[RerankItem], found: _Found, hops: dict[str, int], s: RerankerSettings
) -> list[RerankedResult]:
    """Every result's signals fused, best first (ties in input order)."""
    original = normalised([it.score for it in items])
    uses_episodes = s.strategy in ("episode", "hybrid")
    mentions = [most_episodes(ents, found.episodes) if uses_episodes else 0 for ents in found.entities]
    top = max(mentions, default=0)
    fallback = s.strategy in ("distance", "hybrid") and not found.question
    out: list[RerankedResult] = []
    for i, (it, ents) in enumerate(zip(items, found.entities, strict=True)):
        entity, d = closest_entity(ents, hops)
        sem = found.semantic[i]
        x = Signals(original[i], mentions[i] / top if top else 0.0, distance_score(d),
                    None if sem is None else max(0.0, sem))  # fmt: skip
        graph, combined = fuse(s.strategy, s.weights, x)
        note = None
        if fallback:
            combined, note = it.score, NO_QUESTION_ENTITIES
        elif s.strategy == "semantic" and sem is None:
            note = NO_VECTOR
        elif s.strategy != "semantic" and not ents:
            note = NO_ENTITIES
        ctx = GraphContext(episode_mentions=mentions[i], min_distance=d, nearest_entity=entity,
                           episode_score=round(x.episode, 6), distance_score=round(x.distance, 6),
                           semantic_score=None if x.semantic is None else round(x.semantic, 6), note=note)  # fmt: skip
        out.append(RerankedResult(id=it.id, kind=it.kind, index=i, original_score=it.score, graph_score=graph,
                                  combined_score=combined, graph_context=ctx))  # fmt: skip
    return sorted(out, key=lambda r: -r.combined_score)


def _given_entities(it: RerankItem) -> list[str] | None:
    """A result's entities when the request tells them (None: a chunk whose mentions are looked up)."""
    if it.entity_ids is not None:
        return list(it.entity_ids)
    if it.kind == "entity":
        return [it.id]
    return None if it.kind == "chunk" else []


def _window_start(until: datetime, days: float) -> datetime:
    """`days` before `until`, or the first representable instant when that is earlier (an `as_of`
    in the first days of year 1)."""
    earliest = datetime.min.replace(tzinfo=UTC)
    return until - timedelta(days=days) if until - earliest > timedelta(days=days) else earliest


def _aware(when: datetime) -> datetime:
    """A naive datetime read as UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


async def _nothing() -> dict[str, float]:
    return {}

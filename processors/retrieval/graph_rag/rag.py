"""GraphRag: one long-lived instance per flow; a query is a lightweight call on it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from processors.algorithms.entities import choose_anchors
from processors.algorithms.iris import iri_label
from processors.base.errors import ServiceError
from processors.retrieval.common import Stopwatch, within
from processors.retrieval.graph_rag.sources import GraphSources
from processors.retrieval.graph_rag.traversal import TraversalLimits, batched_traversal
from processors.retrieval.reranker.stage import rank_scores, rerank_stage
from schemas.base import Notice
from schemas.graph_rag import GraphRagParams, GraphRagRequest, GraphRagStats, SeedEntity
from schemas.reranker import RerankItem
from schemas.retrieval import RerankerChoice
from schemas.tenant import Tenant
from schemas.terms import LabelledTriple, Triple

SYSTEM_PROMPT = (
    "You answer questions using only the knowledge-graph facts given. "
    "Each fact is 'subject | relation | object'. Answer briefly; if the facts do not "
    "contain the answer, say so."
)
NO_MODEL_PREFIX = "No language model is configured; the most relevant retrieved facts are:"
MODEL_FAILED_PREFIX = "The language model did not answer; the most relevant retrieved facts are:"


class GraphRagSettings(BaseModel):
    """GraphRAG limits (flow parameters; a request may override those `GraphRagParams` names)."""

    entity_limit: int = Field(default=50, ge=1)
    triple_limit: int = Field(default=30, ge=1)
    max_subgraph_size: int = Field(default=150, ge=1)
    max_path_length: int = Field(default=2, ge=1)
    edge_limit: int = Field(default=25, ge=1)
    traversal: Literal["relevance", "bfs"] = "relevance"
    anchors: Literal["named", "all"] = "named"  # where traversal starts: see GraphRagParams.anchors
    candidates_per_entity: int = Field(default=32, ge=1)  # edges read per frontier entity and direction
    focus_predicates: int = Field(default=8, ge=0)  # predicates nearest the question, read on every entity
    focus_edges: int = Field(default=8, ge=1)  # edges read per entity, direction and focus predicate
    max_frontier: int = Field(default=500, ge=1)  # entities per neighbour round trip, at most
    timeout_s: float = Field(default=60.0, gt=0)  # the whole query
    stage_timeout_s: float = Field(default=30.0, gt=0)  # each call to another service
    answer_facts: int = Field(default=10, ge=1)  # facts listed in a retrieval-only answer
    llm_facts: int = Field(default=40, ge=1)  # most relevant facts in the model's prompt (prompt reading is slow)
    reranker: RerankerChoice = "none"  # rerank the retrieved triples with this reranker strategy


@dataclass
class AnswerPiece:
    """A piece of the answer; the last one (`final`) carries the model's usage and any notices."""

    text: str
    final: bool = False
    model: str | None = None
    in_token: int | None = None
    out_token: int | None = None
    warnings: list[Notice] = field(default_factory=list)


@dataclass
class Retrieval:
    """Everything retrieved for one question."""

    seeds: list[SeedEntity]
    triples: list[LabelledTriple]
    stats: GraphRagStats
    started: float = field(default_factory=time.perf_counter)
    warnings: list[Notice] = field(default_factory=list)


class GraphRag:
    """Seeds → batched traversal → batched labels → answer. Holds no per-request state."""

    def __init__(self, sources: GraphSources, settings: GraphRagSettings) -> None:
        self.sources = sources
        self.settings = settings

    def settings_for(self, req: GraphRagRequest) -> GraphRagSettings:
        """The flow's settings with the request's overrides (the `GraphRagParams` it sets)."""
        overrides = req.model_dump(include=set(GraphRagParams.model_fields), exclude_none=True)
        return self.settings.model_copy(update=overrides)

    @staticmethod
    def _stage(stats: GraphRagStats, name: str, started: float) -> None:
        stats.stage_ms[name] = round((time.perf_counter() - started) * 1000, 3)

    async def retrieve(self, req: GraphRagRequest) -> Retrieval:
        """Retrieve the labelled subgraph for `req.query` within the overall timeout."""
        s = self.settings_for(req)
        return await within(s.timeout_s, "graph retrieval", self._retrieve(req, s))

    async def _retrieve(self, req: GraphRagRequest, s: GraphRagSettings) -> Retrieval:
        limits = TraversalLimits(
            s.max_path_length,
            s.max_subgraph_size,
            s.triple_limit,
            s.edge_limit,
            s.candidates_per_entity,
            s.max_frontier,
            s.traversal,
            s.focus_edges,
        )
        scope = Tenant(req.user, req.collection, req.scope)
        stats = GraphRagStats()
        began, watch = time.perf_counter(), Stopwatch()
        vector = await self.sources.embed(req.query)
        watch.lap("embed")
        found = await self.sources.entities(scope, vector, req.query, s.entity_limit, s.focus_predicates)
        seeds = found.entities
        watch.lap("seeds")
        anchors = choose_anchors(seeds) if s.anchors == "named" else [e.id for e in seeds]
        starts = set(anchors)
        for e in seeds:
            e.anchor = e.id in starts
        sub = await batched_traversal(self.sources, scope, anchors, limits, vector, found.predicates, watch)
        stats.rows_read = sub.rows_read
        stats.levels = sub.levels
        iris = {e.id for e in seeds}
        for tr in sub.triples:
            iris.update((tr.s.value, tr.p.value))
            if tr.o.is_iri:
                iris.add(tr.o.value)
        labels = await self.sources.labels(scope, sorted(iris)) if iris else None
        if labels:
            stats.label_cache_hits, stats.label_cache_misses = labels.cache_hits, labels.cache_misses
        watch.lap("labels")
        names = labels.labels if labels else {}

        def name(iri: str) -> str:  # an IRI without a label reads as its local name
            return names.get(iri) or iri_label(iri)

        for e in seeds:
            e.label = e.label or name(e.id)
        triples = [
            LabelledTriple(
                s=name(tr.s.value),
                p=name(tr.p.value),
                o=name(tr.o.value) if tr.o.is_iri else tr.o.value,
                s_id=tr.s.value,
                p_id=tr.p.value,
                o_id=tr.o.value,
                score=sc,
            )
            for tr, sc in zip(sub.triples, sub.scores, strict=True)
        ]
        if s.reranker != "none":
            items = _rerank_items(sub.triples, triples)
            reranked = await rerank_stage(self.sources, s.reranker, scope, req.query, vector, items, seeds)
            if reranked:
                triples = [triples[i].model_copy(update={"score": sc}) for i, sc in reranked.order]
                watch.lap("rerank")
        watch.report(stats)
        stats.elapsed_ms = round((time.perf_counter() - began) * 1000, 3)
        return Retrieval(seeds, triples, stats, began, found.warnings)

    def facts_text(self, triples: list[LabelledTriple], limit: int | None = None) -> str:
        """Facts as 'subject | relation | object' lines, most relevant first."""
        ranked = sorted(triples, key=lambda t: -(t.score if t.score is not None else 0.0))
        return "\n".join(f"{t.s} | {t.p} | {t.o}" for t in ranked[:limit])

    async def answer(self, req: GraphRagRequest, found: Retrieval) -> AsyncIterator[AnswerPiece]:
        """Yield answer pieces; the last (`final`) carries usage (`model`, `in_token`, `out_token`)."""
        limit = self.settings.answer_facts
        if req.no_llm:
            yield AnswerPiece(f"{NO_MODEL_PREFIX}\n{self.facts_text(found.triples, limit)}", final=True)
            return
        facts = self.facts_text(found.triples, self.settings.llm_facts)
        prompt = f"Facts:\n{facts}\n\nQuestion: {req.query}\nAnswer:"
        t = time.perf_counter()
        began = False
        try:
            async for ch in self.sources.complete(SYSTEM_PROMPT, prompt, req.streaming):
                if ch.final:
                    self._stage(found.stats, "llm", t)
                    if ch.extra.get("configured") is False:
                        yield AnswerPiece(f"{NO_MODEL_PREFIX}\n{self.facts_text(found.triples, limit)}", final=True)
                        return
                    yield AnswerPiece(ch.text, True, ch.model, ch.in_token, ch.out_token)
                    return
                began = began or bool(ch.text)
                yield AnswerPiece(ch.text)
        except ServiceError as e:
            if began:  # part of an answer is out: the failure is the answer's end
                raise
            # The model is unavailable: the retrieved facts are still the answer, with the reason.
            warning = Notice(type="llm-unavailable", message=f"no model answer ({e.type}): {e.message}")
            text = f"{MODEL_FAILED_PREFIX}\n{self.facts_text(found.triples, limit)}"
            yield AnswerPiece(text, final=True, warnings=[warning])


def _rerank_items(raw: list[Triple], triples: list[LabelledTriple]) -> list[RerankItem]:
    """Retrieved triples as reranker results: their ends are their entities, their labels their text."""
    scores = rank_scores([t.score for t in triples])
    return [
        RerankItem(
            id=str(i),
            kind="triple",
            score=sc,
            entity_ids=[tr.s.value, *([tr.o.value] if tr.o.is_iri else [])],
            text=f"{t.s} {t.p} {t.o}",
        )  # fmt: skip
        for i, (tr, t, sc) in enumerate(zip(raw, triples, scores, strict=True))
    ]

"""kg-query: LightRAG's modes over kgflow's stores (bus-free).

Stage 1 (search, by mode):
- local: the entities the question names or is nearest to, and their edges;
- global: the relations nearest the question (scored by their ends' entity vectors and their
  source chunks' vectors, no model; a relation stores no vector), and their end entities;
- hybrid: both, merged round-robin; mix: hybrid plus the chunks nearest the question;
  naive: those chunks only.
Stage 2 keeps the leading entities and relations that fit `max-entity-tokens` and
`max-relation-tokens`; stage 3 merges, round-robin, the chunks linked to the kept relations, to
the kept entities and (mix) the vector chunks, deduplicated by id (with a `reranker`, then
reordered by it); stage 4 fills what
`max-total-tokens` leaves after the system prompt, question, entities and relations with
chunks. Every count is in the flow's model's tokens; every store call carries the scope.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel, Field

from processors.algorithms.extractive import no_model_answer
from processors.algorithms.passage_rank import documents_of
from processors.base.errors import BadRequest
from processors.retrieval.common import NO_DATA, Stopwatch, TokenCounter, within
from processors.retrieval.kg_query.context import (
    SYSTEM,
    chunk_line,
    fill,
    render,
    round_robin,
    truncate,
)
from processors.retrieval.kg_query.sources import KgSources
from processors.retrieval.reranker.stage import rank_scores, rerank_stage
from schemas.documents import Chunk
from schemas.graph_rag import SeedEntity
from schemas.kg_query import KgQueryParams, KgQueryRequest, KgQueryResponse, Mode, TokenUse
from schemas.reranker import RerankItem
from schemas.retrieval import EntityRef, RelationshipRef, RerankerChoice, RetrievalStats
from schemas.tenant import Tenant

NO_MODEL = "No language model is configured; from the retrieved passages:"
NO_MODEL_FACTS_ONLY = "No language model is configured; the most relevant retrieved facts are:"
NO_MODEL_FACTS = 5  # what the retrieval-only answer lists when no passage has a sentence


class KgQuerySettings(BaseModel):
    """kg-query's flow parameters; the defaults are LightRAG's (a request may override the
    `KgQueryParams` names). Defaults are documented in the README's kg-query section."""

    mode: Mode = "mix"
    top_k: int = Field(default=40, ge=1)
    chunk_top_k: int = Field(default=20, ge=1)
    max_entity_tokens: int = Field(default=6000, ge=0)
    max_relation_tokens: int = Field(default=8000, ge=0)
    max_total_tokens: int = Field(default=30000, ge=1)
    chunks_per_item: int = Field(default=5, ge=1)  # chunks linked per kept entity / relation
    timeout_s: float = Field(default=60.0, gt=0)
    stage_timeout_s: float = Field(default=30.0, gt=0)
    reranker: RerankerChoice = "none"  # reorder the merged chunks with this reranker strategy

    def for_request(self, req: KgQueryRequest) -> KgQuerySettings:
        """These settings with the request's overrides."""
        return self.model_copy(update=req.model_dump(include=set(KgQueryParams.model_fields), exclude_none=True))


class KgQuery:
    """One long-lived instance per flow."""

    def __init__(self, sources: KgSources, settings: KgQuerySettings, count: TokenCounter) -> None:
        self.sources, self.settings, self.count = sources, settings, count

    async def run(self, req: KgQueryRequest) -> KgQueryResponse:
        """Build the context, then answer from it (within the time budget)."""
        s = self.settings.for_request(req)
        return await within(s.timeout_s, "kg-query", self._run(req, s))

    async def _run(self, req: KgQueryRequest, s: KgQuerySettings) -> KgQueryResponse:
        began, watch, t = time.perf_counter(), Stopwatch(), Tenant(req.user, req.collection, req.scope)
        vector = await self.sources.embed(req.query)
        watch.lap("embed")
        entities, relations, vector_chunks, seeds = await self._search(t, req.query, vector, s)
        watch.lap("search")
        labels = await self.sources.labels(
            t, sorted({e.id for e in entities} | {x for r in relations for x in (r.s, r.p, r.o)})
        )
        for e in entities:
            e.label = labels.get(e.id, e.label)
        relations = [r.model_copy(update={"s_label": labels.get(r.s), "p_label": labels.get(r.p),
                                          "o_label": labels.get(r.o)}) for r in relations]  # fmt: skip
        # Token counting is CPU work (a 30k-token context): off the event loop, like the stores'.
        kept_e, kept_r = await asyncio.to_thread(self._truncate, req.query, entities, relations, s)
        watch.lap("truncate")
        merged = await self._chunks(t, kept_e, kept_r, vector_chunks, s)
        watch.lap("merge")
        if s.reranker != "none":
            merged = await self._rerank(t, req.query, vector, merged, seeds, s.reranker)
            watch.lap("rerank")
        chunks, prompt, tokens = await asyncio.to_thread(self._context, req.query, kept_e, kept_r, merged, s)
        watch.lap("context")
        refs = documents_of(chunks)
        res = KgQueryResponse(mode=s.mode, entities=kept_e, relationships=kept_r, chunks=chunks, documents=refs,
                              references=refs, context=prompt, tokens=tokens,
                              no_data_found=not (kept_e or kept_r or chunks))  # fmt: skip
        stats = RetrievalStats()
        res.response = NO_DATA if res.no_data_found else retrieval_only_answer(req.query, kept_r, chunks)
        if not res.no_data_found and not req.no_llm:
            done = await self.sources.complete(SYSTEM, prompt, None)
            if done.configured:
                res.response, res.model, res.in_token, res.out_token = (
                    done.text,
                    done.model,
                    done.in_token,
                    done.out_token,
                )
                stats.llm_calls, stats.in_token, stats.out_token = 1, done.in_token, done.out_token
            watch.lap("llm")
        watch.report(stats)
        stats.elapsed_ms = round((time.perf_counter() - began) * 1000, 3)
        res.stats = stats
        return res

    async def _rerank(
        self,
        t: Tenant,
        query: str,
        vector: list[float],
        merged: list[Chunk],
        seeds: list[SeedEntity] | None,
        choice: RerankerChoice,
    ) -> list[Chunk]:
        """The merged chunks in the reranker's order (scored by their rank where they have no score)."""
        scores = rank_scores([c.score for c in merged])
        items = [RerankItem(id=c.id, kind="chunk", score=sc) for c, sc in zip(merged, scores, strict=True)]
        reranked = await rerank_stage(self.sources, choice, t, query, vector, items, seeds)
        if reranked is None:
            return merged
        return [merged[i].model_copy(update={"score": sc}) for i, sc in reranked.order]

    def _context(
        self, query: str, entities: list[EntityRef], relations: list[RelationshipRef], merged: list[Chunk],
        s: KgQuerySettings,
    ) -> tuple[list[Chunk], str, TokenUse]:  # fmt: skip
        """Stage 4: the chunks that fit what the budget leaves, the prompt, and what each part costs."""
        e_lines, r_lines = [_entity_line(e) for e in entities], [_relation_line(r) for r in relations]
        chunks, prompt, budget, base = fill(query, e_lines, r_lines, merged, self.count, s.max_total_tokens)
        tokens = TokenUse(
            tokenizer=self.count.name,
            entities=self.count("\n".join(e_lines)),
            relations=self.count("\n".join(r_lines)),
            chunks=self.count("\n".join(chunk_line(c) for c in chunks)),
            prompt=base,
            total=self.count(SYSTEM) + self.count(prompt),
            chunk_budget=budget,
            max_total_tokens=s.max_total_tokens,
        )
        return chunks, prompt, tokens

    def _truncate(
        self, query: str, entities: list[EntityRef], relations: list[RelationshipRef], s: KgQuerySettings
    ) -> tuple[list[EntityRef], list[RelationshipRef]]:
        """Stage 2: entities, then relations, within their budgets and what the total leaves."""
        system = self.count(SYSTEM)
        skeleton = system + self.count(render(query, [], [], []))
        if skeleton > s.max_total_tokens:
            raise BadRequest(
                f"max-total-tokens {s.max_total_tokens} is less than the prompt and question ({skeleton} tokens)"
            )
        kept_e = truncate(entities, _entity_line, self.count, min(s.max_entity_tokens, s.max_total_tokens - skeleton))
        room = s.max_total_tokens - system - self.count(render(query, [_entity_line(e) for e in kept_e], [], []))
        kept_r = truncate(relations, _relation_line, self.count, min(s.max_relation_tokens, max(0, room)))
        return kept_e, kept_r

    async def _search(
        self, t: Tenant, query: str, vector: list[float], s: KgQuerySettings
    ) -> tuple[list[EntityRef], list[RelationshipRef], list[Chunk], list[SeedEntity] | None]:
        """Stage 1: entities, relations and vector chunks by mode, and the entity search's seeds
        (None: the mode searches none)."""
        local, glob, chunk = (
            s.mode in ("local", "hybrid", "mix"),
            s.mode in ("global", "hybrid", "mix"),
            s.mode in ("mix", "naive"),
        )
        seeds, found_rel, vec_chunks = await asyncio.gather(
            self.sources.seeds(t, vector, query, s.top_k) if local else _empty(),
            self.sources.search_relations(t, vector, s.top_k) if glob else _empty(),
            self.sources.search_chunks(t, vector, None, s.chunk_top_k, "vector") if chunk else _empty(),
        )
        local_ents = [EntityRef(id=e.id, label=e.label, score=e.score, seed=True) for e in seeds]
        local_rels: list[RelationshipRef] = []
        if local_ents:
            local_rels = await self.sources.neighbour_relations(t, [e.id for e in local_ents], vector, s.top_k)
        global_ents = [EntityRef(id=x, score=r.score or 0.0) for r in found_rel for x in (r.s, r.o)]
        entities = round_robin([local_ents, global_ents], key=lambda e: e.id)
        relations = round_robin([local_rels, found_rel], key=lambda r: (r.s, r.p, r.o))
        return entities, relations, vec_chunks, seeds if local else None

    async def _chunks(
        self,
        t: Tenant,
        entities: list[EntityRef],
        relations: list[RelationshipRef],
        vector_chunks: list[Chunk],
        s: KgQuerySettings,
    ) -> list[Chunk]:
        """Stage 3: relation-linked, entity-linked and vector chunks merged round-robin (texts fetched)."""
        keys = [(r.s, r.p, r.o) for r in relations]
        by_entity, by_relation = await asyncio.gather(
            self.sources.entity_chunks(t, [e.id for e in entities], s.chunks_per_item) if entities else _empty(),
            self.sources.relation_chunks(t, keys, s.chunks_per_item) if keys else _empty(),
        )
        rank = {e.id: i for i, e in enumerate(entities)}
        entity_ids = [m.chunk_id for m in sorted(by_entity, key=lambda m: (rank.get(m.entity, len(rank)), -m.count))]
        order = {k: i for i, k in enumerate(keys)}
        relation_ids = [c for _, c in sorted(by_relation, key=lambda rc: order.get(rc[0], len(order)))]
        ids = round_robin([relation_ids, entity_ids, [c.id for c in vector_chunks]], key=lambda x: x)
        known = {c.id: c for c in vector_chunks}
        missing = [i for i in ids if i not in known]
        if missing:
            known.update({c.id: c for c in await self.sources.chunks(t, missing)})
        return [known[i] for i in ids if i in known]


def _entity_line(e: EntityRef) -> str:
    return f"- {e.label or e.id}"


def _relation_line(r: RelationshipRef) -> str:
    return f"- {r.s_label or r.s} | {r.p_label or r.p} | {r.o_label or r.o}"


async def _empty() -> list:  # type: ignore[type-arg]
    return []


def retrieval_only_answer(question: str, relations: list[RelationshipRef], chunks: list[Chunk]) -> str:
    """The answer with no model: says so, then the sentences of the best passages that answer the
    question (cited by chunk id and page or section); the best facts when no passage has one."""
    if any(c.text.strip() for c in chunks):
        return no_model_answer(NO_MODEL, question, chunks)
    facts = [" | ".join(x or "" for x in (r.s_label or r.s, r.p_label or r.p, r.o_label or r.o))
             for r in relations[:NO_MODEL_FACTS]]  # fmt: skip
    return "\n".join([NO_MODEL_FACTS_ONLY, *facts])

"""LazyRag: retrieve the neighbourhood, add community context, answer (bus-free).

Nothing is summarised at index time: a community's summary is written the first time a query
includes it, and the answer is one model call over the retrieved material. Confidence is also
computed without a model: the share of the question's concepts the retrieved entities and
passages cover; the uncovered ones are what is missing.
"""

from __future__ import annotations

import asyncio
import json
import time

from processors.algorithms.passage_rank import documents_of
from processors.algorithms.text_match import normalize
from processors.base.errors import ServiceError
from processors.retrieval.common import NO_DATA, TokenCounter, within
from processors.retrieval.lazy_rag.prompts import (
    MODEL_FAILED_PREFIX,
    SUMMARY_SCHEMA,
    SUMMARY_SYSTEM,
    fitted_summary_prompt,
    retrieval_only_answer,
)
from processors.retrieval.lazy_rag.retrieve import LazyRagSettings, Neighbourhood, retrieve
from processors.retrieval.lazy_rag.sources import LazySources
from schemas.base import Notice
from schemas.communities import CommunityInfo
from schemas.extraction import ConceptMention
from schemas.lazy_rag import LazyRagRequest, LazyRagResponse
from schemas.retrieval import Citation, EntityRef, RelationshipRef, RetrievalStats
from schemas.tenant import Tenant

CONTEXT_COMMUNITIES = 3


class LazyRag:
    """One long-lived instance per flow; a request is a call on it."""

    def __init__(self, sources: LazySources, settings: LazyRagSettings, count: TokenCounter) -> None:
        self.sources = sources
        self.settings = settings
        self.count = count

    async def run(self, req: LazyRagRequest) -> LazyRagResponse:
        """Answer (or, for `expand`, only retrieve) within the request's time budget."""
        s = self.settings.for_request(req)
        return await within(s.timeout_s, "lazy-rag", self._run(req, s))

    async def _run(self, req: LazyRagRequest, s: LazyRagSettings) -> LazyRagResponse:
        began = time.perf_counter()
        # The question's concepts need only its text: found (in the extractor's thread) while
        # retrieval waits on the stores, instead of after it (88 ms of 1,024 at load 15).
        concepts = asyncio.ensure_future(self.sources.concepts(req.query))
        try:
            return await self._answer(req, s, began, concepts)
        finally:
            _discard(concepts)  # done by then unless retrieval failed or found nothing

    async def _answer(
        self,
        req: LazyRagRequest,
        s: LazyRagSettings,
        began: float,
        question_concepts: asyncio.Future[list[ConceptMention]],
    ) -> LazyRagResponse:
        t = Tenant(req.user, req.collection, req.scope)
        nb = await retrieve(self.sources, t, req.query, s)
        stats, watch = RetrievalStats(), nb.watch  # the stages go on on retrieval's stopwatch
        if not nb.chunks and not nb.entities:
            watch.report(stats)
            stats.elapsed_ms = _ms(began)
            return LazyRagResponse(response=NO_DATA, no_data_found=True, stats=stats)
        ids = [e for e, _ in nb.entities]
        summarize = s.use_communities and req.operation == "query" and not req.no_llm
        warnings: list[Notice] = []
        context, concepts = await asyncio.gather(
            self._context(t, ids, s.use_communities, summarize, warnings), question_concepts
        )
        labels, relations, (communities, summary_calls) = context
        stats.llm_calls += summary_calls
        watch.lap("context")
        confidence, missing = coverage(concepts, labels.values(), nb)
        res = LazyRagResponse(
            response=retrieval_only_answer(req.query, nb.chunks),
            confidence=confidence,
            missing_info=missing,
            documents=documents_of(nb.chunks),
            chunks=nb.chunks,
            entities=_entities(nb, labels),
            relationships=[
                r.model_copy(update={"s_label": labels.get(r.s), "o_label": labels.get(r.o)}) for r in relations
            ],  # fmt: skip
            communities=communities[:CONTEXT_COMMUNITIES],
            warnings=warnings,
        )
        if req.operation == "query" and not req.no_llm:
            await self._summarize(req, res, stats)
            watch.lap("llm")
        watch.report(stats)
        stats.elapsed_ms = _ms(began)
        res.stats = stats
        return res

    async def _context(
        self, t: Tenant, ids: list[str], use_communities: bool, summarize: bool, warnings: list[Notice]
    ) -> tuple[dict[str, str], list[RelationshipRef], tuple[list[CommunityInfo], int]]:
        """The entities' labels, the relations among them and their communities: one call unless
        summaries are to be written (a model's work, with its own fallback) or none are wanted."""
        if use_communities and not summarize:
            relations, found, labels = await self.sources.context(t, ids, CONTEXT_COMMUNITIES)
            return labels, relations, (found, 0)
        return await asyncio.gather(
            self.sources.labels(t, ids),
            self.sources.relations(t, ids),
            self._communities(t, ids, summarize, warnings) if use_communities else _none(),
        )

    async def _communities(
        self, t: Tenant, ids: list[str], summarize: bool, warnings: list[Notice]
    ) -> tuple[list[CommunityInfo], int]:
        """The entities' first communities; when their summaries cannot be written (the model
        failed or took too long), their profiles stand in and a warning says why."""
        try:
            return await self.sources.communities(t, ids, summarize, CONTEXT_COMMUNITIES)
        except ServiceError as e:
            if not summarize:
                raise
            why = f"community summaries not written ({e.type}): {e.message}; their profiles stand in"
            warnings.append(Notice(type="llm-unavailable", message=why))
            return await self.sources.communities(t, ids, False, CONTEXT_COMMUNITIES)

    async def _summarize(self, req: LazyRagRequest, res: LazyRagResponse, stats: RetrievalStats) -> None:
        """One model call with structured output, its prompt within the model's budget; with no
        model (or one that fails) the retrieval-only answer stays, with a warning saying why."""
        rels = [f"{r.s_label or r.s} | {r.p_label or 'related to'} | {r.o_label or r.o}" for r in res.relationships]
        entities = [e.label or e.id for e in res.entities]
        prompt = fitted_summary_prompt(req.query, entities, rels, res.communities, res.chunks, self.count)
        try:
            done = await self.sources.complete(SUMMARY_SYSTEM, prompt, SUMMARY_SCHEMA)
        except ServiceError as e:
            res.warnings.append(Notice(type="llm-unavailable", message=f"no model summary ({e.type}): {e.message}"))
            res.response = retrieval_only_answer(req.query, res.chunks, MODEL_FAILED_PREFIX)
            return
        if not done.configured:
            return
        stats.llm_calls += 1
        stats.in_token += done.in_token
        stats.out_token += done.out_token
        res.model, res.in_token, res.out_token = done.model, done.in_token, done.out_token
        try:
            out = json.loads(done.text)
            res.response = str(out.get("summary", "")).strip() or res.response
            res.confidence = min(1.0, max(0.0, float(out.get("confidence", res.confidence))))
            res.missing_info = [str(x) for x in out.get("missing_info", [])][:20]
        except (ValueError, TypeError, AttributeError):
            res.response = done.text.strip() or res.response
        res.citations = _citations(res)


def coverage(concepts: list[ConceptMention], labels: object, nb: Neighbourhood) -> tuple[float, list[str]]:
    """The share of the question's concepts that the retrieved entities or passages name, and the
    concepts they do not (by their words in the question)."""
    keys = list(dict.fromkeys(c.key for c in concepts))
    if not keys:
        return (1.0 if nb.chunks else 0.0), []
    names = {normalize(str(x)) for x in labels}  # type: ignore[attr-defined]
    text = " " + " ".join(normalize(c.text) for c in nb.chunks) + " "
    covered = [k for k in keys if k in names or f" {k} " in text]
    surface = {c.key: c.label for c in concepts}
    missing = [surface[k] for k in keys if k not in covered]
    return round(len(covered) / len(keys), 3), missing


def _entities(nb: Neighbourhood, labels: dict[str, str]) -> list[EntityRef]:
    seeds = {e.id for e in nb.seeds}
    return [EntityRef(id=e, label=labels.get(e), score=round(m, 6), seed=e in seeds) for e, m in nb.entities]


def _citations(res: LazyRagResponse) -> list[Citation]:
    """The retrieved chunks the answer cites by id (only ids that were retrieved count)."""
    by_id = {c.id: c for c in res.chunks}
    cited = [cid for cid in by_id if cid in res.response]
    return [Citation(chunk_id=c, span=by_id[c].text[:200], document_id=by_id[c].document_id,
                     document_name=by_id[c].title, page=by_id[c].page, section=by_id[c].section)
            for c in cited]  # fmt: skip


def _discard(task: asyncio.Future[list[ConceptMention]]) -> None:
    """Stop `task` if it still runs; a failure it ended with is the request's no longer (it
    answered without it), so it is read here rather than reported as never retrieved."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


async def _none() -> tuple[list[CommunityInfo], int]:
    return [], 0


def _ms(began: float) -> float:
    return round((time.perf_counter() - began) * 1000, 3)

"""Drift: DRIFT search (spec 004) as a stream of progress reports and an answer (bus-free).

The search itself is search.py; this module runs it under the request's time budget, turns its
progress into responses as they happen and assembles the answer: key facts with validated
citations, the Q/A tree, and the retrieved context (ranked chunks, their documents, entities,
relationships, communities) — which is all a client gets when no model is configured.
"""

from __future__ import annotations

import asyncio
import time
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

from processors.algorithms.fusion import reciprocal_rank_fusion
from processors.algorithms.passage_rank import documents_of
from processors.base.errors import QueryTimeout, ServiceError
from processors.retrieval.common import NO_DATA, within
from processors.retrieval.drift.progress import Progress, document_names
from processors.retrieval.drift.prompts import NO_ANSWER_PREFIX, NO_MODEL_PREFIX, retrieval_only_answer
from processors.retrieval.drift.search import Search
from processors.retrieval.drift.settings import DriftSettings
from processors.retrieval.drift.sources import DriftSources
from schemas.documents import Chunk
from schemas.drift import DriftProgress, DriftRequest, DriftResponse
from schemas.retrieval import EntityRef

RESULT_CHUNKS = 20
RESULT_ENTITIES = 30
RESULT_RELATIONSHIPS = 30


class Drift:
    """One long-lived instance per flow; a request is a call on it."""

    def __init__(self, sources: DriftSources, settings: DriftSettings) -> None:
        self.sources = sources
        self.settings = settings

    async def stream(self, req: DriftRequest) -> AsyncIterator[DriftResponse]:
        """Progress responses (when `req.streaming`) as the search goes — the last one again
        every `heartbeat_s` while a step takes long, so clients waiting for the next response
        know it is alive — then the answer. Closing the iterator early (the client went away)
        cancels the search and its follow-ups."""
        queue: asyncio.Queue[DriftProgress] = asyncio.Queue()
        task = asyncio.create_task(self.run(req, queue.put_nowait))
        getter: asyncio.Future[DriftProgress] | None = None
        last: DriftProgress | None = None
        try:
            while not (task.done() and queue.empty()):
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({task, getter}, timeout=self.settings.heartbeat_s, return_when=FIRST_COMPLETED)
                if getter.done():
                    last = getter.result()
                    if req.streaming:
                        yield _progress(last)
                    continue
                getter.cancel()
                if last is not None and req.streaming and not task.done():
                    yield _progress(still_working(last))
            final = task.result()
        finally:
            if getter is not None:
                getter.cancel()
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        yield final

    async def run(self, req: DriftRequest, emit: Callable[[DriftProgress], None]) -> DriftResponse:
        """Search within the request's time budget, reporting progress to `emit`; failures are
        reported (phase `error`) and raised as typed errors."""
        s = self.settings.for_request(req)
        progress = Progress(emit)
        search = Search(self.sources, s, req, progress)
        began = time.perf_counter()
        try:
            found = await within(s.timeout_s, "drift", search.run())
        except QueryTimeout as err:
            progress.error(err.message)
            raise
        except ServiceError as e:
            progress.error(f"DRIFT search failed: {e.message}")
            raise
        res = answer(search) if found else DriftResponse(response=NO_DATA, no_data_found=True)
        search.watch.report(search.stats)
        search.stats.elapsed_ms = round((time.perf_counter() - began) * 1000, 3)
        res.stats = search.stats
        done = "No data in scope matches the question" if not found else f"Done: {len(res.key_facts)} key facts"
        names = document_names(res.citations, brackets=True)
        progress.phase("completed", done + (f" from {names}" if names else ""))
        return res


def _progress(p: DriftProgress) -> DriftResponse:
    return DriftResponse(message_type="progress", progress=p, end_of_stream=False)


def still_working(p: DriftProgress) -> DriftProgress:
    """The last report again, saying the step is still running."""
    now = datetime.now(UTC)
    waited = (now - p.timestamp).total_seconds()
    summary = f"{p.thought_summary.split(' (still working')[0]} (still working, {waited:.0f} s)"
    return p.model_copy(update={"thought_summary": summary, "timestamp": now})


def answer(search: Search) -> DriftResponse:
    """The response of a search that found data."""
    stats = search.stats
    stats.citations_returned, stats.citations_dropped = search.book.returned, search.book.dropped
    citations = search.citations()
    chunks = ranked_chunks(search, [c.chunk_id for c in citations])
    labels = search.labels
    entities = sorted(search.entities.items(), key=lambda kv: (-kv[1], kv[0]))[:RESULT_ENTITIES]
    prefix = NO_ANSWER_PREFIX if search.stats.llm_calls else NO_MODEL_PREFIX
    return DriftResponse(
        response=search.final_answer or retrieval_only_answer(search.req.query, chunks, prefix),
        final_answer=search.final_answer,
        key_facts=search.key_facts,
        residual_uncertainty=search.residual,
        initial_answer=search.initial_answer,
        followups=search.tree,
        documents=documents_of(chunks),
        chunks=chunks,
        entities=[EntityRef(id=e, label=labels.get(e), score=round(w, 6)) for e, w in entities],
        relationships=list(search.relations.values())[:RESULT_RELATIONSHIPS],
        communities=search.communities,
        citations=citations,
        model=search.model,
    )


def ranked_chunks(search: Search, cited: list[str]) -> list[Chunk]:
    """The retrieved chunks, best first: those the answer cites, then every retrieval's lists
    fused by reciprocal rank (primer samples and follow-ups alike), then neighbour chunks."""
    fused = reciprocal_rank_fusion(search.rankings)
    order = list(dict.fromkeys([*cited, *sorted(fused, key=lambda c: (-fused[c], c)), *search.neighbours]))
    out: list[Chunk] = []
    for cid in order:
        chunk = search.book.chunks.get(cid)
        if chunk is not None:
            out.append(chunk.model_copy(update={"score": round(fused.get(cid, 0.0), 6)}))
    return out[:RESULT_CHUNKS]

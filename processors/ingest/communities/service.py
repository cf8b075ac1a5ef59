"""Communities processor: builds a collection's communities (no model) and serves them, writing a
community's summary with text-completion the first time a query asks for it."""

from __future__ import annotations

import asyncio
import time

from processors.base.processor import FlowContext, ServiceSpec, StoreProcessor
from processors.base.settings import flow_params
from processors.ingest.communities.detect import CommunityParams, detect
from processors.ingest.communities.profiles import profile
from processors.ingest.communities.prompts import SUMMARY_SYSTEM, profile_text, summary_prompt
from schemas.communities import (
    BuildCommunities,
    CommunitiesOf,
    CommunitiesResponse,
    CommunityInfo,
    ListCommunities,
    SearchCommunities,
    SummarizeCommunities,
)
from schemas.services import COMMUNITIES, TEXT_COMPLETION, Service
from schemas.text_completion import TextCompletionRequest

CommunitiesRequest = BuildCommunities | ListCommunities | SearchCommunities | CommunitiesOf | SummarizeCommunities
SUMMARY_TOKENS = 200
SUMMARY_PASSAGES = 3


class CommunitiesProcessor(StoreProcessor):
    """Serves `communities`."""

    name = COMMUNITIES.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(COMMUNITIES, self.handle)]

    def calls(self) -> list[Service]:
        return [TEXT_COMPLETION]

    async def on_flow_start(self, flow: FlowContext) -> None:
        flow.state = flow_params(CommunityParams, flow.parameters)

    async def handle(self, req: CommunitiesRequest, flow: FlowContext) -> CommunitiesResponse:
        """Dispatch on the request's operation."""
        store = self.stores.communities
        if isinstance(req, BuildCommunities):
            return await self.build(req.user, req.collection, flow.state)
        if isinstance(req, ListCommunities):
            found = await store.list(req.user, req.collection, req.level, req.ids, req.limit, req.scope)
        elif isinstance(req, SearchCommunities):
            found = await store.search(req.user, req.collection, req.vector, req.level, req.limit, req.scope)
        elif isinstance(req, CommunitiesOf):
            return await self.of_entities(req, flow)
        else:
            return await self.summarize(req, flow)
        return CommunitiesResponse(communities=await self._labelled(req.user, req.collection, found))

    async def build(self, user: str, collection: str, params: CommunityParams) -> CommunitiesResponse:
        """Detect, profile and store the collection's communities."""
        started = time.perf_counter()
        edges, mentions, vectors = await self.stores.communities.graph(user, collection)
        found = await asyncio.to_thread(detect, edges, params)
        records = await asyncio.to_thread(profile, found, mentions, edges, vectors)
        await self.stores.communities.replace(user, collection, records)
        levels: dict[int, int] = {}
        for r in records:
            levels[r.level] = levels.get(r.level, 0) + 1
        return CommunitiesResponse(levels=levels, build_ms=round((time.perf_counter() - started) * 1000, 1))

    async def _labelled(self, user: str, collection: str, found: list[CommunityInfo]) -> list[CommunityInfo]:
        """Communities with their top entities' labels (one batched label lookup)."""
        iris = sorted({e for c in found for e in c.top_entities})
        labels = await self.stores.triples.labels(user, collection, iris) if iris else {}
        return [c.model_copy(update={"top_entity_labels": [labels.get(e, e) for e in c.top_entities]}) for c in found]

    async def of_entities(self, req: CommunitiesOf, flow: FlowContext) -> CommunitiesResponse:
        """Membership of the entities, and their first `limit` communities (summarised if asked)."""
        of = await self.stores.communities.of_entities(req.user, req.collection, req.entities, req.level)
        ids = list(dict.fromkeys(of[e] for e in req.entities if e in of))[: req.limit]
        if not ids:
            return CommunitiesResponse(membership=of, store_round_trips=1)
        if req.summarize:
            summary = SummarizeCommunities(user=req.user, collection=req.collection, ids=ids)
            res = await self.summarize(summary, flow)
        else:
            found = await self.stores.communities.list(req.user, req.collection, None, ids, len(ids))
            res = CommunitiesResponse(communities=await self._labelled(req.user, req.collection, found))
        order = {cid: i for i, cid in enumerate(ids)}
        res.communities.sort(key=lambda c: order.get(c.id, len(order)))
        return res.model_copy(update={"membership": of, "store_round_trips": 1})

    async def summarize(self, req: SummarizeCommunities, flow: FlowContext) -> CommunitiesResponse:
        """Cached summaries, new ones written (and cached) by the model, or profiles without one."""
        found = await self._labelled(req.user, req.collection, await self.stores.communities.list(
            req.user, req.collection, None, req.ids, len(req.ids)))  # fmt: skip
        todo = [c for c in found if c.summary is None]
        chunk_ids = sorted({cid for c in todo for cid in c.top_chunks[:SUMMARY_PASSAGES]})
        chunks = {c.id: c.text for c in await self.stores.documents.chunks(req.user, req.collection, chunk_ids)}
        hashes = await self.stores.communities.membership(req.user, req.collection, [c.id for c in todo])
        out = CommunitiesResponse()
        written: dict[str, CommunityInfo] = {}
        for c in todo:
            passages = [chunks[cid] for cid in c.top_chunks[:SUMMARY_PASSAGES] if cid in chunks]
            res = await flow.client(TEXT_COMPLETION).request(
                TextCompletionRequest(system=SUMMARY_SYSTEM, prompt=summary_prompt(c.top_entity_labels, passages),
                                      max_tokens=SUMMARY_TOKENS)
            )  # fmt: skip
            if not res.configured:
                written[c.id] = c.model_copy(update={"summary": profile_text(c.top_entity_labels, passages)})
                continue
            out.llm_calls += 1
            out.in_token += res.in_token or 0
            out.out_token += res.out_token or 0
            text = res.response.strip()
            await self.stores.communities.set_summary(
                req.user, req.collection, c.id, hashes.get(c.id, ""), text, res.model or ""
            )
            written[c.id] = c.model_copy(update={"summary": text, "summary_model": res.model})
        out.communities = [written.get(c.id, c) for c in found]
        return out

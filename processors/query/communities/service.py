"""Communities processor: serves a collection's communities to queries — list, search by profile
vector, the communities of entities, summaries. It is a reader that writes one thing: a
community's summary is written by text-completion the first time a query asks for it and cached
against the community's membership (docs/architecture.md: summaries are lazy), so the cache lives with the
reads that fill it. Building communities is `community-build`'s (processors/ingest/communities)."""

from __future__ import annotations

from processors.base.operations import by_operation
from processors.base.processor import FlowContext, ServiceSpec
from processors.query.communities.context import (
    Context,
    StoresContextReads,
    communities_of,
    context_alongside,
    context_of,
    labelled,
)
from processors.query.communities.prompts import SUMMARY_SYSTEM, profile_text, summary_prompt
from processors.services.store_processor import StoreProcessor
from processors.stores.chunk_reads import ChunkReads
from schemas.communities import (
    CommunitiesOf,
    CommunitiesResponse,
    CommunityInfo,
    ListCommunities,
    SearchCommunities,
    SummarizeCommunities,
)
from schemas.retrieval import RelationshipRef
from schemas.services import COMMUNITIES, TEXT_COMPLETION, Service
from schemas.tenant import Tenant
from schemas.text_completion import TextCompletionRequest

SUMMARY_TOKENS = 200
SUMMARY_PASSAGES = 3


class CommunitiesProcessor(StoreProcessor):
    """Serves `communities`."""

    name = COMMUNITIES.name

    def services(self) -> list[ServiceSpec]:
        table = {ListCommunities: self.list_communities, SearchCommunities: self.search,
                 CommunitiesOf: self.of_entities, SummarizeCommunities: self.summarize}  # fmt: skip
        return [ServiceSpec(COMMUNITIES, by_operation(table))]

    def calls(self) -> list[Service]:
        return [TEXT_COMPLETION]

    async def list_communities(self, req: ListCommunities, flow: FlowContext) -> CommunitiesResponse:
        """Communities of a level, or by id, largest first (in scope)."""
        found = await self.stores.communities.list(req.tenant, req.level, req.ids, req.limit)
        return CommunitiesResponse(communities=await self._labelled(req.tenant, found))

    async def search(self, req: SearchCommunities, flow: FlowContext) -> CommunitiesResponse:
        """Communities nearest the vector (in scope)."""
        store = self.stores.communities
        found = await store.search(req.tenant, req.vector, req.level, req.limit)
        return CommunitiesResponse(communities=await self._labelled(req.tenant, found))

    async def _labelled(self, tenant: Tenant, found: list[CommunityInfo]) -> list[CommunityInfo]:
        """Communities with their top entities' labels (one batched label lookup)."""
        return await labelled(StoresContextReads(self.stores), tenant, found)

    async def of_entities(self, req: CommunitiesOf, flow: FlowContext) -> CommunitiesResponse:
        """Membership of the entities, and their first `limit` communities (summarised if asked);
        not summarising, with the relations among them when asked (context.py)."""
        if not req.summarize:
            return await self.context(req)
        of = await self.stores.communities.of_entities(req.tenant, req.entities, req.level)
        ids = list(dict.fromkeys(of[e] for e in req.entities if e in of))[: req.limit]
        if not ids:
            return CommunitiesResponse(membership=of)
        res = await self.summarize(SummarizeCommunities(user=req.user, collection=req.collection, ids=ids), flow)
        order = {cid: i for i, cid in enumerate(ids)}
        res.communities.sort(key=lambda c: order.get(c.id, len(order)))
        return res.model_copy(update={"membership": of})

    async def context(self, req: CommunitiesOf) -> CommunitiesResponse:
        """The entities' communities and, when asked, the relations among them and their labels:
        on a store that holds them all, in one read transaction; otherwise each from its own store."""
        t, ents, level, limit = req.tenant, req.entities, req.level, req.limit
        if not req.relations and not req.labels:
            of, found = await communities_of(StoresContextReads(self.stores), t, ents, level, limit)
            return CommunitiesResponse(membership=of, communities=found)

        async def work(reads: ChunkReads) -> Context:
            shared = reads.context_reads()
            if shared is None:
                return await context_alongside(self.stores, t, ents, level, limit, req.relations, req.labels)
            return await context_of(shared, t, ents, level, limit, req.relations, req.labels)

        got = await self.stores.documents.read_as_one(work)
        rels = [RelationshipRef(s=h.s, p=h.p, o=h.o, weight=float(h.support)) for h in got.relations]
        return CommunitiesResponse(membership=got.membership, communities=got.communities, relations=rels,
                                   labels=got.labels)  # fmt: skip

    async def summarize(self, req: SummarizeCommunities, flow: FlowContext) -> CommunitiesResponse:
        """Cached summaries, new ones written (and cached) by the model, or profiles without one."""
        found = await self._labelled(req.tenant, await self.stores.communities.list(
            req.tenant, None, req.ids, len(req.ids)))  # fmt: skip
        todo = [c for c in found if c.summary is None]
        chunk_ids = sorted({cid for c in todo for cid in c.top_chunks[:SUMMARY_PASSAGES]})
        chunks = {c.id: c.text for c in await self.stores.documents.chunks(req.tenant, chunk_ids)}
        hashes = await self.stores.communities.membership(req.tenant, [c.id for c in todo])
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
            await self.stores.communities.set_summary(req.tenant, c.id, hashes.get(c.id, ""), text, res.model or "")
            written[c.id] = c.model_copy(update={"summary": text, "summary_model": res.model})
        out.communities = [written.get(c.id, c) for c in found]
        return out

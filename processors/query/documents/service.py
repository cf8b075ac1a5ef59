"""Documents processor: serves `documents` reads from the process's stores — chunk search, the
chunk-entity links and relations of a neighbourhood, episodes, similarities, listings. Each is one
store call, scoped by user + collection and the request's scope. Writes are `document-store`'s
(processors/ingest/document_store)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from processors.algorithms.expansion import expand
from processors.algorithms.passage_rank import PassageRankParams
from processors.base.operations import by_operation
from processors.base.processor import FlowContext, ServiceSpec
from processors.base.settings import flow_params
from processors.query.documents.relations import search_relations
from processors.query.documents.search import search_chunks, search_in, search_many
from processors.query.graph_embeddings.seeds import seed_search, seeds_in
from processors.query.graph_embeddings.service import matches
from processors.services.store_processor import StoreProcessor
from processors.stores.chunk_reads import ChunkReads
from processors.stores.documents_protocol import ChunkQuery, DocumentCounts
from processors.stores.protocol import EntityHit
from schemas.base import Notice, ScopedRequest
from schemas.documents import (
    Chunk,
    ChunkLinks,
    ChunkSearch,
    ChunkSimilarities,
    CollectionInfo,
    DocumentsResponse,
    DocumentStatus,
    EntityChunks,
    EntityRelations,
    EpisodeMentions,
    GetChunks,
    ListCollections,
    ListDocuments,
    Mention,
    RelationChunks,
    SearchRelations,
)
from schemas.retrieval import RelationshipRef
from schemas.services import DOCUMENTS


class DocumentsProcessor(StoreProcessor):
    """Serves `documents` (see the module docstring)."""

    name = DOCUMENTS.name

    def services(self) -> list[ServiceSpec]:
        table = {
            DocumentStatus: self.status,
            ChunkSearch: self.search,
            EntityChunks: self.entity_chunks,
            EntityRelations: self.entity_relations,
            SearchRelations: self.search_relations,
            RelationChunks: self.relation_chunks,
            EpisodeMentions: self.episode_mentions,
            ChunkSimilarities: self.chunk_similarities,
            GetChunks: self.get_chunks,
            ListDocuments: self.list_documents,
            ListCollections: self.list_collections,
        }
        return [ServiceSpec(DOCUMENTS, by_operation(table))]

    async def on_flow_start(self, flow: FlowContext) -> None:
        flow.state = flow_params(PassageRankParams, flow.parameters)

    async def status(self, req: DocumentStatus, flow: FlowContext) -> DocumentsResponse:
        """Content hashes of the stored documents among the ids, and the collection's write stamp."""
        hashes = await self.stores.documents.hashes(req.tenant, req.document_ids)
        return DocumentsResponse(hashes=hashes, stamp=await self.stores.documents.write_stamp(req.tenant))

    async def search(self, req: ChunkSearch, flow: FlowContext) -> DocumentsResponse:
        """The best chunks of the scope (among given communities' chunks, when asked)."""
        if req.communities is not None:
            return await self.community_search(req, flow)
        if req.searches:
            asked = [(s.vector, s.text) for s in req.searches]
            each = await search_many(self.stores.documents, req.tenant, asked, req.mode, req.limit, flow.state)
            chunks = list({c.id: c for found in each for c in found}.values())
            by_search = [[(c.id, c.score or 0.0) for c in found] for found in each]
            return DocumentsResponse(chunks=chunks, by_search=by_search)
        if req.seed_entities and req.vector is not None:
            return await self.search_and_seed(req, req.vector, flow)
        found = await search_chunks(self.stores.documents, _question(req), req.text, req.mode, req.limit, flow.state)
        return DocumentsResponse(chunks=found)

    async def search_and_seed(self, req: ChunkSearch, vector: list[float], flow: FlowContext) -> DocumentsResponse:
        """The search and the question's seed entities: over the whole collection of a store that
        holds the entities too, in the search's own read (one round trip, issue 38); otherwise
        the seeds read from their own stores alongside (as graph-embeddings reads them)."""
        q, text, limit = _question(req), req.text, req.seed_entities
        whole = req.scope is None or req.scope.is_empty

        async def work(reads: ChunkReads) -> tuple[list[Chunk], tuple[list[EntityHit], list[Notice]]]:
            found = search_in(reads, q, text, req.mode, req.limit, flow.state, None)
            entities = reads.entity_reads() if whole else None
            if entities is None:
                return await asyncio.gather(found, seed_search(self.stores, req.tenant, vector, text, limit))
            return await found, await seeds_in(entities, self.stores.triples, req.tenant, vector, text, limit)

        chunks, (hits, notices) = await self.stores.documents.read_as_one(work)
        return DocumentsResponse(chunks=chunks, seeds=matches(hits), warnings=notices)

    async def community_search(self, req: ChunkSearch, flow: FlowContext) -> DocumentsResponse:
        """Chunks of the scope among the chunks of `req.communities`: the best `limit` of them
        all, or with `per_community` the best of each community (one search per community)."""
        members = await self.stores.communities.member_chunks(req.tenant, req.communities or [])

        async def among(ids: list[str], limit: int) -> list[Chunk]:
            q = _question(req)
            return await search_chunks(self.stores.documents, q, req.text, req.mode, limit, flow.state, ids)

        if req.per_community is None:
            every = list(dict.fromkeys(c for ids in members.values() for c in ids))
            found = await among(every, req.limit)
            return DocumentsResponse(chunks=found)
        wanted = [c for c in dict.fromkeys(req.communities or []) if members.get(c)]
        per = await asyncio.gather(*(among(members[c], req.per_community) for c in wanted))
        chunks = {ch.id: ch for found in per for ch in found}
        by_community = {c: [ch.id for ch in found] for c, found in zip(wanted, per, strict=True) if found}
        return DocumentsResponse(chunks=list(chunks.values()), by_community=by_community)

    async def entity_chunks(self, req: EntityChunks, flow: FlowContext) -> DocumentsResponse:
        """Chunks mentioning the entities and what the given chunks mention; with `hops`, that
        many levels of expansion from them (algorithms/expansion)."""
        docs, q = self.stores.documents, _tenant(req)
        if req.hops == 1:
            links = await docs.links(q, req.entities, req.chunk_ids, req.per_entity)
        else:  # every level in one read transaction, the next frontier chosen between its reads

            async def levels(reads: ChunkReads) -> list[Mention]:
                async def read(entities: Sequence[str], chunk_ids: Sequence[str]) -> list[Mention]:
                    return await reads.links(q, entities, chunk_ids, req.per_entity)

                return await expand(read, req.entities, req.chunk_ids, req.hops, req.max_entities)

            links = await docs.read_as_one(levels)
        return DocumentsResponse(links=ChunkLinks(mentions=links))

    async def entity_relations(self, req: EntityRelations, flow: FlowContext) -> DocumentsResponse:
        """Relations among the entities with an in-scope source, strongest first."""
        found = await self.stores.documents.relations(req.tenant, req.entities, req.limit)
        rels = [RelationshipRef(s=h.s, p=h.p, o=h.o, weight=float(h.support)) for h in found]
        return DocumentsResponse(relations=rels)

    async def search_relations(self, req: SearchRelations, flow: FlowContext) -> DocumentsResponse:
        """Relations nearest the vector with an in-scope source (relations.py: no stored relation vector)."""
        hits = await search_relations(self.stores.entities, self.stores.documents, req.tenant, req.vector, req.limit)
        rels = [RelationshipRef(s=h.s, p=h.p, o=h.o, weight=float(h.support), score=h.score) for h in hits]
        return DocumentsResponse(relations=rels)

    async def relation_chunks(self, req: RelationChunks, flow: FlowContext) -> DocumentsResponse:
        """Source chunks of the relations in the scope."""
        docs = self.stores.documents
        found = await docs.relation_chunks(_tenant(req), req.relations, req.per_relation)
        return DocumentsResponse(relation_chunks=[(rc.relation, rc.chunk_id) for rc in found])

    async def episode_mentions(self, req: EpisodeMentions, flow: FlowContext) -> DocumentsResponse:
        """What the chunks mention and each entity's episodes in the window."""
        window = (req.since.timestamp(), req.until.timestamp()) if req.since and req.until else None
        found = await self.stores.documents.episodes(_tenant(req), req.entities, req.chunk_ids, window)
        return DocumentsResponse(chunk_mentions=found.mentioned, episodes=found.counts)

    async def chunk_similarities(self, req: ChunkSimilarities, flow: FlowContext) -> DocumentsResponse:
        """Cosine of the vector to each chunk's stored vector (in scope)."""
        sims = await self.stores.documents.chunk_similarities(_question(req), req.chunk_ids)
        return DocumentsResponse(similarities=sims)

    async def get_chunks(self, req: GetChunks, flow: FlowContext) -> DocumentsResponse:
        """Chunks by id (in scope), in the order asked."""
        return DocumentsResponse(chunks=await self.stores.documents.chunks(req.tenant, req.chunk_ids))

    async def list_documents(self, req: ListDocuments, flow: FlowContext) -> DocumentsResponse:
        """Documents of the collection in id order."""
        docs = await self.stores.documents.documents(req.tenant, req.limit)
        return DocumentsResponse(documents=docs)

    async def list_collections(self, req: ListCollections, flow: FlowContext) -> DocumentsResponse:
        """Every collection of the user with what it holds."""
        triples = await self.stores.triples.collections(req.user)
        entities = await self.stores.entities.collections(req.user)
        docs = await self.stores.documents.counts(req.user)
        none = DocumentCounts(0, 0)
        names = sorted(set(triples) | set(entities) | set(docs))
        infos = [
            CollectionInfo(
                collection=c,
                documents=docs.get(c, none).documents,
                chunks=docs.get(c, none).chunks,
                entities=entities.get(c, 0),
                triples=triples.get(c, 0),
            )
            for c in names
        ]
        return DocumentsResponse(collections=infos)


def _question(req: ChunkSearch | ChunkSimilarities) -> ChunkQuery:
    return ChunkQuery(req.tenant, req.vector)


def _tenant(req: ScopedRequest) -> ChunkQuery:
    """A read with no question vector: the request's tenant and scope."""
    return ChunkQuery(req.tenant)

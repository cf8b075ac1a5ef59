"""Documents processor: serves `documents` from the process's stores.

Writes link each document's concepts into the collection's graph (triples + entity vectors) and
store its chunks, mentions and relation provenance; a replaced or deleted document takes with
it the relations and concepts nothing else supports. Reads are one store call each, scoped by
user + collection and the request's scope.
"""

from __future__ import annotations

import asyncio

from processors.base.processor import FlowContext, ServiceSpec, StoreProcessor
from processors.base.settings import flow_params
from processors.models.embeddings.client import FlowEmbedder
from processors.query.documents.linking import (
    RELATED_TO,
    RELATED_TO_LABEL,
    Linked,
    attach_relation_vectors,
    link,
    unlinked_triples,
)
from processors.retrieval.relevance.graphrank import GraphRankParams
from processors.stores.documents_protocol import RemovedLinks
from schemas.documents import (
    Chunk,
    ChunkLinks,
    ChunkSearch,
    ChunkSimilarities,
    CollectionInfo,
    DeleteCollection,
    DeleteDocuments,
    DocumentsResponse,
    DocumentStatus,
    EntityChunks,
    EntityRelations,
    EpisodeMentions,
    GetChunks,
    ListCollections,
    ListDocuments,
    RelationChunks,
    SearchRelations,
    StoreDocuments,
)
from schemas.retrieval import RelationshipRef
from schemas.services import DOCUMENTS, EMBEDDINGS, Service
from schemas.terms import Term

DocumentsRequest = (
    StoreDocuments
    | DocumentStatus
    | ChunkSearch
    | EntityChunks
    | EntityRelations
    | GetChunks
    | ListCollections
    | DeleteDocuments
    | DeleteCollection
    | ListDocuments
    | SearchRelations
    | RelationChunks
    | EpisodeMentions
    | ChunkSimilarities
)


class DocumentsProcessor(StoreProcessor):
    """Serves `documents` (see the module docstring)."""

    name = DOCUMENTS.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(DOCUMENTS, self.handle)]

    async def on_flow_start(self, flow: FlowContext) -> None:
        flow.state = flow_params(GraphRankParams, flow.parameters)

    def calls(self) -> list[Service]:
        return [EMBEDDINGS]

    async def handle(self, req: DocumentsRequest, flow: FlowContext) -> DocumentsResponse:
        """Dispatch on the request's operation."""
        docs = self.stores.documents
        if isinstance(req, StoreDocuments):
            return await self.store(req, flow)
        if isinstance(req, DocumentStatus):
            return DocumentsResponse(hashes=await docs.hashes(req.user, req.collection, req.document_ids))
        if isinstance(req, ChunkSearch):
            if req.communities is not None:
                return await self.community_search(req, flow)
            found = await docs.search(
                req.user, req.collection, req.vector, req.text, req.mode, req.limit, req.scope, flow.state
            )
            return DocumentsResponse(chunks=found, store_round_trips=1)
        if isinstance(req, EntityChunks):
            links = await docs.links(req.user, req.collection, req.entities, req.chunk_ids, req.per_entity, req.scope)
            return DocumentsResponse(links=ChunkLinks(mentions=links), store_round_trips=1)
        if isinstance(req, EntityRelations):
            found = await docs.relations(req.user, req.collection, req.entities, req.limit, req.scope)
            rels = [RelationshipRef(s=s_, p=p_, o=o_, weight=float(w)) for s_, p_, o_, w in found]
            return DocumentsResponse(relations=rels, store_round_trips=1)
        if isinstance(req, SearchRelations):
            hits = await docs.search_relations(req.user, req.collection, req.vector, req.limit, req.scope)
            rels = [RelationshipRef(s=s_, p=p_, o=o_, weight=float(n), score=sc) for s_, p_, o_, sc, n in hits]
            return DocumentsResponse(relations=rels, store_round_trips=1)
        if isinstance(req, RelationChunks):
            pairs = await docs.relation_chunks(req.user, req.collection, req.relations, req.per_relation, req.scope)
            return DocumentsResponse(relation_chunks=pairs, store_round_trips=1)
        if isinstance(req, EpisodeMentions):
            window = (req.since.timestamp(), req.until.timestamp()) if req.since and req.until else None
            mentioned, counts = await docs.episodes(
                req.user, req.collection, req.entities, req.chunk_ids, window, req.scope
            )
            return DocumentsResponse(chunk_mentions=mentioned, episodes=counts, store_round_trips=1)
        if isinstance(req, ChunkSimilarities):
            sims = await docs.chunk_similarities(req.user, req.collection, req.vector, req.chunk_ids, req.scope)
            return DocumentsResponse(similarities=sims, store_round_trips=1)
        if isinstance(req, GetChunks):
            return DocumentsResponse(chunks=await docs.chunks(req.user, req.collection, req.chunk_ids, req.scope))
        if isinstance(req, ListDocuments):
            return DocumentsResponse(documents=await docs.documents(req.user, req.collection, req.limit, req.scope))
        if isinstance(req, ListCollections):
            return DocumentsResponse(collections=await self.collections(req.user))
        if isinstance(req, DeleteDocuments):
            return await self.delete_documents(req)
        existed = any(c.collection == req.collection for c in await self.collections(req.user))
        await self.delete_collection(req.user, req.collection)  # also clears what a failed load left
        return DocumentsResponse(deleted=int(existed))

    async def community_search(self, req: ChunkSearch, flow: FlowContext) -> DocumentsResponse:
        """Chunks of the scope among the chunks of `req.communities`: the best `limit` of them
        all, or with `per_community` the best of each community (one search per community)."""
        members = await self.stores.communities.member_chunks(req.user, req.collection, req.communities or [])

        async def among(ids: list[str], limit: int) -> list[Chunk]:
            return await self.stores.documents.search(
                req.user, req.collection, req.vector, req.text, req.mode, limit, req.scope, flow.state, chunk_ids=ids
            )

        if req.per_community is None:
            every = list(dict.fromkeys(c for ids in members.values() for c in ids))
            found = await among(every, req.limit)
            return DocumentsResponse(chunks=found, store_round_trips=2)
        wanted = [c for c in dict.fromkeys(req.communities or []) if members.get(c)]
        per = await asyncio.gather(*(among(members[c], req.per_community) for c in wanted))
        chunks = {ch.id: ch for found in per for ch in found}
        by_community = {c: [ch.id for ch in found] for c, found in zip(wanted, per, strict=True) if found}
        return DocumentsResponse(chunks=list(chunks.values()), by_community=by_community, store_round_trips=2)

    async def store(self, req: StoreDocuments, flow: FlowContext) -> DocumentsResponse:
        """Link the documents' concepts into the graph, then store them."""
        user, coll = req.user, req.collection
        keys = sorted({c.key for d in req.documents for c in d.concepts})
        linked = link(req.documents, await self.stores.entities.named(user, coll, keys))
        new = list(linked.new_concepts.items())
        vectors: dict[str, list[float]] = {}
        if new:
            embedded = await FlowEmbedder(flow.client(EMBEDDINGS)).embed([label for _, label in new])
            vectors = {iri: v for (iri, _), v in zip(new, embedded, strict=True)}
            items = [(iri, label, vectors[iri]) for iri, label in new]
            await self.stores.entities.upsert(user, coll, items, "entity")
        ends = sorted({x for s, _, o in linked.relations for x in (s, o)} - set(vectors))
        vectors.update(await self.stores.entities.vectors(user, coll, ends) if ends else {})
        attach_relation_vectors(linked, vectors)
        if any(p == RELATED_TO for _, p, _ in linked.relations) and not await self.stores.entities.vectors(
            user, coll, [RELATED_TO]
        ):
            (v,) = await FlowEmbedder(flow.client(EMBEDDINGS)).embed([RELATED_TO_LABEL])
            await self.stores.entities.upsert(user, coll, [(RELATED_TO, RELATED_TO_LABEL, v)], "predicate")
        if linked.predicates:
            await self._add_predicates(user, coll, linked, flow)
        await self.stores.triples.add_triples(user, coll, linked.triples())
        removed = await self.stores.documents.store(user, coll, linked.records)
        await self._unlink(user, coll, removed, announce=False)
        touched = {m.entity for r in linked.records for m in r.mentions} | set(removed.touched)
        await self.stores.communities.mark_stale(user, coll, sorted(touched))
        await self.announce_graph_changed(user, coll)
        return DocumentsResponse(stored=len(linked.records))

    async def _add_predicates(self, user: str, coll: str, linked: Linked, flow: FlowContext) -> None:
        """Typed relations' predicates: a label where the collection has none (a predicate loaded
        from triples keeps its own) and a vector in the entity index, as `related to` has."""
        named = await self.stores.triples.labels(user, coll, sorted(linked.predicates))
        for iri in named:
            linked.predicates.pop(iri)
        have = await self.stores.entities.vectors(user, coll, sorted(linked.predicates))
        todo = [(iri, label) for iri, label in sorted(linked.predicates.items()) if iri not in have]
        if todo:
            embedded = await FlowEmbedder(flow.client(EMBEDDINGS)).embed([label for _, label in todo])
            items = [(iri, label, v) for (iri, label), v in zip(todo, embedded, strict=True)]
            await self.stores.entities.upsert(user, coll, items, "predicate")

    async def delete_documents(self, req: DeleteDocuments) -> DocumentsResponse:
        """Delete documents; what only they supported leaves the graph; their communities go stale."""
        user, coll = req.user, req.collection
        known = await self.stores.documents.hashes(user, coll, req.document_ids)
        removed = await self.stores.documents.delete_documents(user, coll, sorted(known))
        await self._unlink(user, coll, removed)
        await self.stores.communities.mark_stale(user, coll, removed.touched)
        return DocumentsResponse(deleted=len(known), not_found=[d for d in req.document_ids if d not in known])

    async def _unlink(self, user: str, coll: str, removed: RemovedLinks, announce: bool = True) -> None:
        """Remove the relations and concepts no document supports any more."""
        if removed.relations or removed.concepts:
            labels = await self.stores.triples.labels(user, coll, removed.concepts) if removed.concepts else {}
            await self.stores.triples.remove_triples(user, coll, unlinked_triples(removed.relations, labels))
            if removed.concepts:
                await self.stores.entities.delete(user, coll, removed.concepts)
            await self._drop_unused_predicates(user, coll, {p for _, p, _ in removed.relations} - {RELATED_TO})
        if announce:
            await self.announce_graph_changed(user, coll)

    async def _drop_unused_predicates(self, user: str, coll: str, predicates: set[str]) -> None:
        """Typed relations' predicates no triple of the collection uses any more: their label and
        vector go with the last relation (a predicate of loaded triples is still used: it stays)."""
        unused = []
        for p in sorted(predicates):
            if not await self.stores.triples.pattern(user, coll, None, Term.iri(p), None, 1):
                unused.append(p)
        if unused:
            labels = await self.stores.triples.labels(user, coll, unused)
            await self.stores.triples.remove_triples(user, coll, unlinked_triples([], labels))
            await self.stores.entities.delete(user, coll, unused)

    async def collections(self, user: str) -> list[CollectionInfo]:
        """Every collection of the user with what it holds."""
        triples = await self.stores.triples.collections(user)
        entities = await self.stores.entities.collections(user)
        docs = await self.stores.documents.counts(user)
        names = sorted(set(triples) | set(entities) | set(docs))
        return [
            CollectionInfo(
                collection=c,
                documents=docs.get(c, (0, 0))[0],
                chunks=docs.get(c, (0, 0))[1],
                entities=entities.get(c, 0),
                triples=triples.get(c, 0),
            )
            for c in names
        ]

    async def delete_collection(self, user: str, collection: str) -> None:
        """Drop the collection from every store."""
        await self.stores.documents.delete_collection(user, collection)
        await self.stores.communities.delete_collection(user, collection)
        await self.stores.triples.delete_collection(user, collection)
        await self.stores.entities.delete_collection(user, collection)
        await self.announce_graph_changed(user, collection)

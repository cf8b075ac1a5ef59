"""Document-store processor: the writer of documents. `store` links each document's concepts into
the collection's graph (triples + entity vectors) and stores its chunks, mentions and relation
provenance; a replaced or deleted document takes with it the relations and concepts nothing else
supports; deleting a collection drops it from every store. Each write tells label caches the
collection changed. The document-load flow sends `store`; the gateway routes only the deletes."""

from __future__ import annotations

from processors.algorithms.iris import RELATED_TO, RELATED_TO_LABEL
from processors.base.operations import by_operation
from processors.base.processor import FlowContext, ServiceSpec, StoreProcessor
from processors.ingest.document_store.linking import Linked, attach_relation_vectors, link, unlinked_triples
from processors.models.embeddings.client import FlowEmbedder
from processors.stores.documents_protocol import RemovedLinks
from schemas.documents import DeleteCollection, DeleteDocuments, DocumentsResponse, StoreDocuments
from schemas.services import DOCUMENT_STORE, EMBEDDINGS, Service
from schemas.terms import Term


class DocumentStoreProcessor(StoreProcessor):
    """Serves `document-store` (see the module docstring)."""

    name = DOCUMENT_STORE.name

    def services(self) -> list[ServiceSpec]:
        table = {StoreDocuments: self.store, DeleteDocuments: self.delete_documents,
                 DeleteCollection: self.delete_collection}  # fmt: skip
        return [ServiceSpec(DOCUMENT_STORE, by_operation(table))]

    def calls(self) -> list[Service]:
        return [EMBEDDINGS]

    async def store(self, req: StoreDocuments, flow: FlowContext) -> DocumentsResponse:
        """Link the documents' concepts into the graph, then store them."""
        user, coll = req.user, req.collection
        keys = sorted({c.key for d in req.documents for c in d.concepts})
        linked = link(req.documents, await self.stores.entities.named(user, coll, keys))
        embedder = FlowEmbedder(flow.client(EMBEDDINGS))
        new = list(linked.new_concepts.items())
        vectors: dict[str, list[float]] = {}
        if new:
            embedded = await embedder.embed([label for _, label in new])
            vectors = {iri: v for (iri, _), v in zip(new, embedded, strict=True)}
            items = [(iri, label, vectors[iri]) for iri, label in new]
            await self.stores.entities.upsert(user, coll, items, "entity", model=embedder.model)
        ends = sorted({x for s, _, o in linked.relations for x in (s, o)} - set(vectors))
        vectors.update(await self.stores.entities.vectors(user, coll, ends) if ends else {})
        attach_relation_vectors(linked, vectors)
        if any(p == RELATED_TO for _, p, _ in linked.relations) and not await self.stores.entities.vectors(
            user, coll, [RELATED_TO]
        ):
            (v,) = await embedder.embed([RELATED_TO_LABEL])
            items = [(RELATED_TO, RELATED_TO_LABEL, v)]
            await self.stores.entities.upsert(user, coll, items, "predicate", model=embedder.model)
        if linked.predicates:
            await self._add_predicates(user, coll, linked, embedder)
        await self.stores.triples.add_triples(user, coll, linked.triples())
        removed = await self.stores.documents.store(user, coll, linked.records)
        await self._unlink(user, coll, removed)
        touched = {m.entity for r in linked.records for m in r.mentions} | set(removed.touched)
        await self.stores.communities.mark_stale(user, coll, sorted(touched))
        await self.announce_graph_changed(user, coll)
        return DocumentsResponse(stored=len(linked.records))

    async def _add_predicates(self, user: str, coll: str, linked: Linked, embedder: FlowEmbedder) -> None:
        """Typed relations' predicates: a label where the collection has none (a predicate loaded
        from triples keeps its own) and a vector in the entity index, as `related to` has."""
        named = await self.stores.triples.labels(user, coll, sorted(linked.predicates))
        for iri in named:
            linked.predicates.pop(iri)
        have = await self.stores.entities.vectors(user, coll, sorted(linked.predicates))
        todo = [(iri, label) for iri, label in sorted(linked.predicates.items()) if iri not in have]
        if todo:
            embedded = await embedder.embed([label for _, label in todo])
            items = [(iri, label, v) for (iri, label), v in zip(todo, embedded, strict=True)]
            await self.stores.entities.upsert(user, coll, items, "predicate", model=embedder.model)

    async def delete_documents(self, req: DeleteDocuments, flow: FlowContext) -> DocumentsResponse:
        """Delete documents; what only they supported leaves the graph; their communities go stale."""
        user, coll = req.user, req.collection
        known = await self.stores.documents.hashes(user, coll, req.document_ids)
        removed = await self.stores.documents.delete_documents(user, coll, sorted(known))
        await self._unlink(user, coll, removed)
        await self.stores.communities.mark_stale(user, coll, removed.touched)
        await self.announce_graph_changed(user, coll)
        return DocumentsResponse(deleted=len(known))

    async def _unlink(self, user: str, coll: str, removed: RemovedLinks) -> None:
        """Remove the relations and concepts no document supports any more."""
        if not (removed.relations or removed.concepts):
            return
        labels = await self.stores.triples.labels(user, coll, removed.concepts) if removed.concepts else {}
        await self.stores.triples.remove_triples(user, coll, unlinked_triples(removed.relations, labels))
        if removed.concepts:
            await self.stores.entities.delete(user, coll, removed.concepts)
        await self._drop_unused_predicates(user, coll, {p for _, p, _ in removed.relations} - {RELATED_TO})

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

    async def delete_collection(self, req: DeleteCollection, flow: FlowContext) -> DocumentsResponse:
        """Drop the collection from every store."""
        user, collection = req.user, req.collection
        await self.stores.documents.delete_collection(user, collection)
        await self.stores.communities.delete_collection(user, collection)
        await self.stores.triples.delete_collection(user, collection)
        await self.stores.entities.delete_collection(user, collection)
        await self.announce_graph_changed(user, collection)
        return DocumentsResponse(deleted=1)

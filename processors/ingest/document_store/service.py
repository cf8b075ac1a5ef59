"""Document-store processor: the writer of documents. `store` links each document's concepts into
the collection's graph (triples + entity vectors) and stores its chunks, mentions and relation
provenance; a replaced or deleted document takes with it the relations and concepts nothing else
supports; deleting a collection drops it from every store. Each write tells label caches the
collection changed. The document-load flow sends `store`; the gateway routes only the deletes."""

from __future__ import annotations

import logging
import time
from typing import NoReturn

from processors.algorithms.iris import RELATED_TO, RELATED_TO_LABEL
from processors.base.errors import ServiceError
from processors.base.operations import by_operation
from processors.base.processor import FlowContext, ServiceSpec
from processors.ingest.document_store.linking import Linked, link, spelling_of, unlinked_triples
from processors.models.embeddings.client import BULK_REQUEST_TEXTS, FlowEmbedder
from processors.services.store_processor import StoreProcessor
from processors.stores.documents_protocol import COLLECTION, DeletedSince, DocumentRecord, RemovedLinks
from processors.stores.protocol import LoadState
from schemas.base import COLLECTION_DELETED
from schemas.documents import (
    DeleteCollection,
    DeleteDocuments,
    DocumentsResponse,
    StoreDocuments,
    WriteMark,
)
from schemas.services import DOCUMENT_STORE, EMBEDDINGS, Service
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple

log = logging.getLogger(__name__)
DOCUMENTS_SOURCE = "documents"  # the load state's source while documents are being written


class DocumentStoreProcessor(StoreProcessor):
    """Serves `document-store` (see the module docstring)."""

    name = DOCUMENT_STORE.name

    def services(self) -> list[ServiceSpec]:
        table = {StoreDocuments: self.store, WriteMark: self.write_mark, DeleteDocuments: self.delete_documents,
                 DeleteCollection: self.delete_collection}  # fmt: skip
        return [ServiceSpec(DOCUMENT_STORE, by_operation(table))]

    def calls(self) -> list[Service]:
        return [EMBEDDINGS]

    async def store(self, req: StoreDocuments, flow: FlowContext) -> DocumentsResponse:
        """Link the documents' concepts into the graph, then store them, in an order a rerun after
        a kill at any point completes: the collection is marked incomplete first; new concepts are
        claimed (owned) before their labels (the batch's guess) and their vectors, which make them
        named; then the documents (what `status` reports as stored), then the labels the
        collection's spellings give (`_agree_labels`), then the mark is cleared. A delete after
        the load's stamp wins (see `_deleted`, `_live`, `_write`)."""
        tenant = req.tenant.unscoped
        stamp = req.stamp if req.stamp is not None else await self.stores.documents.write_stamp(tenant)
        gone = await self._deleted(tenant, [d.document.id for d in req.documents], stamp, req.started)
        documents = [d for d in req.documents if d.document.id not in gone]
        if not documents:
            await self._finish(tenant, req.started)
            return DocumentsResponse(withdrawn=sorted(gone))
        started = req.started if req.started is not None else await self._begin(tenant)
        keys = sorted({c.key for d in documents for c in d.concepts})
        named = await self.stores.entities.named(tenant, keys)
        claimed = await self.stores.documents.claimed(tenant, sorted(set(named.values()))) if named else set()
        labelled = await self.stores.triples.labels(tenant, sorted(claimed)) if claimed else {}
        # a concept a killed write claimed but did not label is written again, as a new one
        linked = link(documents, {k: i for k, i in named.items() if i not in claimed or i in labelled}, claimed)
        concept_keys = {i: k for r in linked.records for i, k in r.keys.items() if i in linked.new_concepts}
        await self.stores.documents.claim(tenant, concept_keys)
        embedder = FlowEmbedder(flow.client(EMBEDDINGS), batch=BULK_REQUEST_TEXTS)  # many short labels
        await self._live(tenant, linked, stamp, started)
        if linked.predicates:
            await self._add_predicates(tenant, linked, embedder)
        # labels before vectors: a writer's every label write is followed by its vector (`_agree_labels`)
        await self.stores.triples.add_triples(tenant, linked.triples(), replace_labels=True)
        new = list(linked.new_concepts.items())
        if new:  # (a relation keeps no vector: relation search reads its ends' vectors)
            embedded = await embedder.embed([label for _, label in new])
            items = [(iri, label, v) for (iri, label), v in zip(new, embedded, strict=True)]
            await self._live(tenant, linked, stamp, started)  # (embedding took a while)
            await self.stores.entities.upsert(tenant, items, "entity", model=embedder.model)
        if any(p == RELATED_TO for _, p, _ in linked.relations) and not await self.stores.entities.vectors(
            tenant, [RELATED_TO]
        ):
            (v,) = await embedder.embed([RELATED_TO_LABEL])
            items = [(RELATED_TO, RELATED_TO_LABEL, v)]
            await self.stores.entities.upsert(tenant, items, "predicate", model=embedder.model)
        removed = await self._write(tenant, linked, stamp, started, gone)
        await self._unlink(tenant, removed)
        touched = {m.entity for r in linked.records for m in r.mentions} | set(removed.touched)
        concepts = {i for r in linked.records for i in r.spellings} | set(removed.touched)
        await self._live(tenant, linked, stamp, started)  # (stored, then deleted with the collection)
        await self._agree_labels(tenant, concepts, dict(linked.new_concepts), embedder)
        await self._live(tenant, linked, stamp, started)  # (labels written after a delete go again)
        await self.stores.communities.mark_stale(tenant, sorted(touched))
        await self._finish(tenant, started)
        await self.announce_graph_changed(tenant.user, tenant.collection)
        return DocumentsResponse(stored=len(linked.records), withdrawn=sorted(gone))

    async def _deleted(self, tenant: Tenant, ids: list[str], stamp: float, started: float | None) -> set[str]:
        """Of `ids`, those deleted after the load's `stamp` (a live load's later batch, or a killed
        load's request redelivered after the delete, must not bring them back); refused when the
        collection was (nothing is written)."""
        gone = await self.stores.documents.deleted_after(tenant, ids, stamp)
        if COLLECTION in gone:
            await self._finish(tenant, started)
            raise self._refusal(tenant)
        if gone:
            log.warning("not storing %d documents deleted after their load began: %s", len(gone), sorted(gone)[:5])
        return gone

    async def _write(
        self, tenant: Tenant, linked: Linked, stamp: float, started: float | None, gone: set[str]
    ) -> RemovedLinks:
        """Store the documents in one transaction that also checks the deletion marks (a delete
        answered while this request linked them wins): a document deleted since is left out (added
        to `gone`) and the rest written again; a collection deleted since refuses the request. What
        was linked for what is not stored, and nothing else supports, is removed again."""
        refused: list[DocumentRecord] = []
        removed = RemovedLinks()
        while linked.records:
            try:
                removed = await self.stores.documents.store(tenant, linked.records, stamp)
                break
            except DeletedSince as e:
                whole = COLLECTION in e.ids
                refused += [r for r in linked.records if whole or r.document.id in e.ids]
                linked.records = [r for r in linked.records if not whole and r.document.id not in e.ids]
                gone |= {r.document.id for r in refused}
                if whole:
                    await self._refuse(tenant, refused, linked, started)
        if refused:  # after the rest is stored: what they still mention stays
            await self._take_back(tenant, refused, None)
        return removed

    async def _live(self, tenant: Tenant, linked: Linked, stamp: float, started: float | None) -> None:
        """Before a write to another store: a collection deleted since the stamp refuses the request
        here (what it wrote so far is taken back), so little can land after the delete's removal."""
        if COLLECTION in await self.stores.documents.deleted_after(tenant, [], stamp):
            await self._refuse(tenant, linked.records, linked, started)

    async def _refuse(
        self, tenant: Tenant, records: list[DocumentRecord], linked: Linked, started: float | None
    ) -> NoReturn:
        """Take back what the request linked, clear its mark, refuse it (its collection was deleted)."""
        await self._take_back(tenant, records, linked)
        await self._finish(tenant, started)
        await self.announce_graph_changed(tenant.user, tenant.collection)
        raise self._refusal(tenant)

    async def _take_back(self, tenant: Tenant, refused: list[DocumentRecord], whole: Linked | None) -> None:
        """Remove the relations and concepts linked for `refused` documents that nothing stored
        supports (`whole`: the collection was deleted; then every concept the request linked, as
        it may have written a label or vector of any after the delete, and `related to` when unused)."""
        relations = sorted({(x.s, x.p, x.o) for r in refused for x in r.relations})
        concepts = {m.entity for r in refused for m in r.mentions} | set(whole.new_concepts if whole else ())
        candidates = RemovedLinks(relations=relations, concepts=sorted(concepts))
        created = sorted(concepts) if whole else []  # (the delete dropped their claims)
        await self._unlink(tenant, await self.stores.documents.unsupported(tenant, candidates, created))
        if whole is not None:
            await self._drop_unused_predicates(tenant, {RELATED_TO, *whole.predicates})

    @staticmethod
    def _refusal(tenant: Tenant) -> ServiceError:
        return ServiceError(
            COLLECTION_DELETED,
            f"collection {tenant.user}/{tenant.collection} was deleted after this load began: not stored",
        )

    async def _agree_labels(
        self, tenant: Tenant, concepts: set[str], indexed: dict[str, str], embedder: FlowEmbedder
    ) -> None:
        """Label the concepts whose spellings this write changed by their most frequent spelling
        (`spelling_of` the sums the document store keeps), in the triples, then the entity index
        (`indexed`: what this writer indexed). A writer checks again after its writes until what
        it reads agrees, and re-indexes a concept whose label moved on from what it indexed: the
        last to check a concept reads every write before it, so loads in any order or concurrency
        end with the same labels and vectors."""
        todo = sorted(concepts)
        while todo:
            spellings = await self.stores.documents.spellings(tenant, todo)
            want = {iri: spelling_of(counts) for iri, counts in spellings.items()}
            have = await self.stores.triples.labels(tenant, todo)
            relabel = {iri: label for iri, label in want.items() if have.get(iri) != label}
            stale = {iri: have[iri] for iri in todo if iri in indexed and iri in have and have[iri] != indexed[iri]}
            if relabel:
                labels = [Triple(s=Term.iri(i), p=Term.iri(RDFS_LABEL), o=Term.literal(x)) for i, x in relabel.items()]
                await self.stores.triples.add_triples(tenant, labels, replace_labels=True)
            fix = {**stale, **relabel}
            if fix:
                vectors = await embedder.embed(list(fix.values()))
                items = [(iri, label, v) for (iri, label), v in zip(fix.items(), vectors, strict=True)]
                await self.stores.entities.upsert(tenant, items, "entity", model=embedder.model)
                indexed.update(fix)
            todo = sorted(fix)

    async def write_mark(self, req: WriteMark, flow: FlowContext) -> DocumentsResponse:
        """Mark the collection incomplete for a load about to work on it (see `_begin`), or clear
        the mark `req.finish` (the load stored nothing). The response carries the load's stamp
        (`req.stamp`, else the collection's now); refused if the collection was deleted since."""
        tenant = req.tenant.unscoped
        if req.finish is not None:
            await self._finish(tenant, req.finish)
            return DocumentsResponse(started=req.finish)
        stamp = req.stamp if req.stamp is not None else await self.stores.documents.write_stamp(tenant)
        await self._deleted(tenant, [], stamp, None)
        started = await self._begin(tenant)
        await self._deleted(tenant, [], stamp, started)  # a delete meanwhile: the mark is finished, not left
        return DocumentsResponse(started=started, stamp=stamp)

    async def _begin(self, tenant: Tenant) -> float | None:
        """Mark the collection incomplete while documents are written (queries warn, as after an
        interrupted triples load); None when an unfinished triples load's mark is there to keep."""
        prior = await self.stores.triples.load_state(tenant)
        if prior is not None and not prior.complete and prior.source != DOCUMENTS_SOURCE:
            return None
        started = time.time()
        await self.stores.triples.set_load_state(tenant, LoadState(started=started, source=DOCUMENTS_SOURCE))
        return started

    async def _finish(self, tenant: Tenant, started: float | None) -> None:
        """Clear the mark, unless a later write has set its own (it clears it when it finishes)."""
        current = await self.stores.triples.load_state(tenant)
        if started is not None and current is not None and current.started == started:
            done = LoadState(started=started, finished=time.time(), source=DOCUMENTS_SOURCE)
            await self.stores.triples.set_load_state(tenant, done)

    async def _add_predicates(self, tenant: Tenant, linked: Linked, embedder: FlowEmbedder) -> None:
        """Typed relations' predicates: a label where the collection has none (a predicate loaded
        from triples keeps its own) and a vector in the entity index, as `related to` has."""
        named = await self.stores.triples.labels(tenant, sorted(linked.predicates))
        for iri in named:
            linked.predicates.pop(iri)
        have = await self.stores.entities.vectors(tenant, sorted(linked.predicates))
        todo = [(iri, label) for iri, label in sorted(linked.predicates.items()) if iri not in have]
        if todo:
            embedded = await embedder.embed([label for _, label in todo])
            items = [(iri, label, v) for (iri, label), v in zip(todo, embedded, strict=True)]
            await self.stores.entities.upsert(tenant, items, "predicate", model=embedder.model)

    async def delete_documents(self, req: DeleteDocuments, flow: FlowContext) -> DocumentsResponse:
        """Delete documents; what only they supported leaves the graph; their communities go stale."""
        tenant = req.tenant.unscoped
        known = await self.stores.documents.hashes(tenant, req.document_ids)
        await self.stores.documents.note_deleted(tenant, req.document_ids)  # first: a write after it is refused
        removed = await self.stores.documents.delete_documents(tenant, sorted(known))
        await self._unlink(tenant, removed)
        embedder = FlowEmbedder(flow.client(EMBEDDINGS), batch=BULK_REQUEST_TEXTS)
        await self._agree_labels(tenant, set(removed.touched), {}, embedder)
        await self.stores.communities.mark_stale(tenant, removed.touched)
        await self.announce_graph_changed(tenant.user, tenant.collection)
        return DocumentsResponse(deleted=len(known), not_found=[d for d in req.document_ids if d not in known])

    async def _unlink(self, tenant: Tenant, removed: RemovedLinks) -> None:
        """Remove the relations and concepts no document supports any more."""
        if not (removed.relations or removed.concepts):
            return
        labels = await self.stores.triples.labels(tenant, removed.concepts) if removed.concepts else {}
        await self.stores.triples.remove_triples(tenant, unlinked_triples(removed.relations, labels))
        if removed.concepts:
            await self.stores.entities.delete(tenant, removed.concepts)
        await self._drop_unused_predicates(tenant, {p for _, p, _ in removed.relations} - {RELATED_TO})

    async def _drop_unused_predicates(self, tenant: Tenant, predicates: set[str]) -> None:
        """Typed relations' predicates no triple of the collection uses any more: their label and
        vector go with the last relation (a predicate of loaded triples is still used: it stays)."""
        unused = []
        for p in sorted(predicates):
            if not await self.stores.triples.pattern(tenant, None, Term.iri(p), None, 1):
                unused.append(p)
        if unused:
            labels = await self.stores.triples.labels(tenant, unused)
            await self.stores.triples.remove_triples(tenant, unlinked_triples([], labels))
            await self.stores.entities.delete(tenant, unused)

    async def delete_collection(self, req: DeleteCollection, flow: FlowContext) -> DocumentsResponse:
        """Drop the collection from every store: marked deleted first, so every write of a load
        begun before is refused from then on, and one under way is done before (its rows go)."""
        tenant = req.tenant.unscoped
        existed = (
            tenant.collection in await self.stores.triples.collections(tenant.user)
            or tenant.collection in await self.stores.entities.collections(tenant.user)
            or tenant.collection in await self.stores.documents.counts(tenant.user)
        )
        await self.stores.documents.note_deleted(tenant, [COLLECTION])
        await self.stores.documents.delete_collection(tenant)  # also clears what a failed load left
        await self.stores.communities.delete_collection(tenant)
        await self.stores.triples.delete_collection(tenant)
        await self.stores.entities.delete_collection(tenant)
        await self.announce_graph_changed(tenant.user, tenant.collection)
        return DocumentsResponse(deleted=int(existed))

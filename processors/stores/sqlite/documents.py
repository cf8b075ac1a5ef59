"""Embedded document store: documents, chunks (text, offsets, vectors), chunk-entity mentions,
relation provenance and concept ownership in one SQLite file (`docs.db`), searched through its
own indexes — FTS5 over the chunks' BM25 terms, IVF lists over chunk vectors
(vector_lists.py) — so no read holds a collection in the process and a write rebuilds nothing.
Every query is scoped by user and collection, and a request's scope (documents, metadata) is a
predicate inside it (passages.py)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from processors.algorithms.passage_rank import Candidates, HopLinks, Passage
from processors.stores.chunk_reads import DirectReads
from processors.stores.documents_protocol import (
    ChunkQuery,
    DocumentCounts,
    DocumentRecord,
    Episodes,
    RelationChunk,
    RelationHit,
    RemovedLinks,
)
from processors.stores.sqlite import chunk_candidates, deletions, mention_rows, passages, relation_rows
from processors.stores.sqlite.deletions import DeletionMarks
from processors.stores.sqlite.doc_writes import backfill, delete_docs, insert_records, unlinked
from processors.stores.sqlite.docs_schema import (
    CLAIM_CONCEPT,
    CONCEPT_KEYS,
    EPISODE_COUNTS,
    EPISODES,
    GET_CHUNKS,
    OWNED_CONCEPTS,
    SCHEMA,
    chunk,
    migrate,
    scoped_ids,
    vec_of,
)
from processors.stores.sqlite.mention_rows import OF_CHUNKS as CHUNK_LINKS
from processors.stores.sqlite.mention_rows import OF_DOCS as SCOPED_ENTITIES
from processors.stores.sqlite.pool import SqlitePool
from processors.stores.sqlite.relation_rows import IN as RELATIONS_IN
from processors.stores.sqlite.relation_rows import OUT as RELATIONS_OUT
from processors.stores.sqlite.relation_rows import SCOPED_IN, SCOPED_OUT
from processors.stores.sqlite.spellings import delete_collection as delete_spellings
from processors.stores.sqlite.spellings import read_spellings
from processors.stores.sqlite.vector_lists import VectorLists
from schemas.documents import Chunk, DocumentInfo, Mention
from schemas.tenant import Tenant

T = TypeVar("T")


class SqliteDocumentStore(DeletionMarks, DirectReads):
    """DocumentStore on SQLite (see module docstring; its deletion marks: deletions.py)."""

    def __init__(self, path: Path) -> None:
        # Not mapped: a question reads a few IVF lists of a file that may hold millions of chunks, and
        # mapped pages would stay in the process's resident set (the page cache keeps them anyway).
        self.db = SqlitePool(path, SCHEMA, migrate=migrate, mapped=False)
        self.lists = VectorLists()
        with self.db.writer() as conn:  # a docs.db from before the store searched itself: indexed once
            backfill(conn, self.lists)

    # --- writes -------------------------------------------------------------------------------
    async def store(
        self, tenant: Tenant, records: Sequence[DocumentRecord], stamp: float | None = None
    ) -> RemovedLinks:
        """Write documents (replacing earlier versions of the same ids) in one transaction, refused
        after a delete since `stamp`; returns what the replaced versions linked that nothing links."""
        ids = [r.document.id for r in records]

        def write(conn: sqlite3.Connection) -> RemovedLinks:
            deletions.check(conn, tenant, ids, stamp)
            removed = delete_docs(conn, self.lists, tenant, ids)
            insert_records(conn, self.lists, tenant, records)
            return unlinked(conn, tenant, removed)

        return await self.db.write(write)

    async def delete_documents(self, tenant: Tenant, ids: Sequence[str]) -> RemovedLinks:
        """Delete documents; returns the relations and owned concepts nothing links any more."""

        def write(conn: sqlite3.Connection) -> RemovedLinks:
            removed = delete_docs(conn, self.lists, tenant, list(ids))
            return unlinked(conn, tenant, removed)

        return await self.db.write(write)

    async def unsupported(self, tenant: Tenant, candidates: RemovedLinks, created: Sequence[str] = ()) -> RemovedLinks:
        """Of a refused write's relations and concepts, what nothing supports (see DocumentStore)."""
        return await self.db.write(lambda conn: deletions.unsupported(conn, tenant, candidates, created))

    async def claim(self, tenant: Tenant, concepts: Mapping[str, str]) -> None:
        """Owned concept rows for `concepts` (IRI -> key), before their vectors and labels exist."""
        rows = [(tenant.user, tenant.collection, iri, key) for iri, key in concepts.items()]
        await self.db.write(lambda conn: conn.executemany(CLAIM_CONCEPT, rows))

    async def claimed(self, tenant: Tenant, iris: Sequence[str]) -> set[str]:
        """Of `iris`, the owned concepts."""
        args = (tenant.user, tenant.collection, json.dumps(list(iris)))
        rows = await self.db.read(lambda conn: conn.execute(OWNED_CONCEPTS, args).fetchall())
        return {str(r[0]) for r in rows}

    async def spellings(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, dict[str, int]]:
        """Of `iris`, each concept's spellings with their mentions (see spellings.py)."""
        return await self.db.read(lambda conn: read_spellings(conn, tenant, iris))

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop every row of the collection."""

        def write(conn: sqlite3.Connection) -> None:
            uc = (tenant.user, tenant.collection)
            conn.execute(
                "DELETE FROM chunk_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE user = ? AND collection = ?)", uc
            )
            conn.execute(mention_rows.DELETE_COLLECTION, uc)  # before the ids and chunks its rows name
            relation_rows.delete_collection(conn, tenant)
            delete_spellings(conn, tenant)
            for table in ("documents", "doc_meta", "chunks", "concepts",
                          "concept_keys", "chunk_subjects", "collection_counts", "term_df"):  # fmt: skip
                conn.execute("DELETE FROM " + table + " WHERE user = ? AND collection = ?", uc)
            self.lists.drop(conn, tenant)

        await self.db.write(write)

    # --- reads --------------------------------------------------------------------------------
    async def hashes(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, str]:
        """Content hash of each stored document of `ids`."""
        sql = (
            "SELECT id, content_hash FROM documents WHERE user = ? AND collection = ?"
            " AND id IN (SELECT value FROM json_each(?))"
        )
        rows = await self.db.read(
            lambda c: c.execute(sql, (tenant.user, tenant.collection, json.dumps(list(ids)))).fetchall()
        )
        return {str(i): str(h) for i, h in rows}

    async def candidates(
        self, q: ChunkQuery, terms: Sequence[str], k: int, among: Sequence[str] | None = None,
        phrases: Sequence[str] = (),
    ) -> Candidates:  # fmt: skip
        """The `k` nearest chunks and the `k` best by BM25 over `terms` (of `among`, when given), with cosines
        and the chunks searched (see chunk_candidates); with `phrases`, what `named` finds, in the same read."""
        asked = [(None if q.vector is None else _unit(q.vector), terms)]

        def read(conn: sqlite3.Connection, allowed: set[str] | None, scoped: int | None) -> Candidates:
            (found,) = chunk_candidates.candidates(conn, self.lists, q.tenant, asked, k, (scoped, allowed), among)
            found.named = passages.named(conn, q.tenant, phrases, _unit(q.vector), scoped) if phrases else {}
            return found

        return await self._read(q.tenant, read)

    async def candidates_many(
        self, tenant: Tenant, questions: Sequence[tuple[Sequence[float] | None, Sequence[str]]], k: int
    ) -> list[Candidates]:
        """`candidates` for each (vector, terms), in one read (see chunk_candidates.candidates)."""
        asked = [(None if v is None else _unit(v), terms) for v, terms in questions]
        return await self._read(
            tenant, lambda conn, allowed, scoped: chunk_candidates.candidates(conn, self.lists, tenant, asked, k,
                                                                              (scoped, allowed), None)
        )  # fmt: skip

    async def concept_keys(self, tenant: Tenant, keys: Sequence[str]) -> dict[str, list[str]]:
        """Key -> the concepts it is a key or an alias of."""
        if not keys:
            return {}

        def read(conn: sqlite3.Connection) -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for key, iri in conn.execute(CONCEPT_KEYS, (tenant.user, tenant.collection, json.dumps(list(keys)))):
                out.setdefault(key, []).append(iri)
            return out

        return await self.db.read(read)

    async def named(self, q: ChunkQuery, phrases: Sequence[str]) -> dict[str, tuple[str, list[Passage]]]:
        """Of `phrases`, the concept keys in the scope: key -> (concept, its subject chunks)."""
        unit = _unit(q.vector)
        return await self._read(
            q.tenant,
            lambda conn, _, scoped: passages.named(conn, q.tenant, phrases, unit, scoped),
        )  # fmt: skip

    async def passage_links(
        self, q: ChunkQuery, chunk_ids: Sequence[str], skip: Collection[str], cap: int, known: Collection[str]
    ) -> HopLinks:
        """One graphrank hop from `chunk_ids` (see passages.links)."""
        unit = _unit(q.vector)

        def read(conn: sqlite3.Connection, _: set[str] | None, scoped: int | None) -> HopLinks:
            return passages.links(conn, q.tenant, chunk_ids, skip, cap, known, unit, scoped)

        return await self._read(q.tenant, read)

    async def chunks(self, tenant: Tenant, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (in the scope), in the order asked."""
        if not ids:
            return []

        def read(conn: sqlite3.Connection) -> list[Chunk]:
            allowed = scoped_ids(conn, tenant)
            rows = conn.execute(GET_CHUNKS, (tenant.user, tenant.collection, json.dumps(list(ids)))).fetchall()
            by_id = {r[0]: r for r in rows if allowed is None or r[1] in allowed}
            return [chunk(by_id[i]) for i in dict.fromkeys(ids) if i in by_id]

        return await self.db.read(read)

    async def links(
        self, q: ChunkQuery, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        """Chunk-entity links of a neighbourhood in one store call (two statements): of each
        entity's first LINKS_READ mentions in scope, the `per_entity` most mentioning; every
        mention of the chunks."""

        def read(conn: sqlite3.Connection, allowed: set[str] | None, scoped: int | None) -> list[Mention]:
            return passages.mention_links(conn, q.tenant, entities, chunk_ids, per_entity, (scoped, allowed))

        return await self._read(q.tenant, read)

    async def relations(self, tenant: Tenant, entities: Sequence[str], limit: int) -> list[RelationHit]:
        """Relations among `entities` with their in-scope support (chunks), strongest first."""

        def read(conn: sqlite3.Connection) -> list[RelationHit]:
            allowed = scoped_ids(conn, tenant)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            args = (tenant.user, tenant.collection, json.dumps(list(entities)), docs, limit)
            return [RelationHit(s_, p_, o_, int(n)) for s_, p_, o_, n in conn.execute(relation_rows.AMONG, args)]

        return await self.db.read(read)

    async def relations_of(self, tenant: Tenant, entities: Sequence[str], per_entity: int) -> list[RelationHit]:
        """Relations with an end among `entities` and a source in scope: each entity's `per_entity`
        most supported as subject and as object (support: its chunks in scope), each relation once."""

        def read(conn: sqlite3.Connection) -> list[RelationHit]:
            allowed = scoped_ids(conn, tenant)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            found: dict[tuple[str, str, str], int] = {}
            for sql in (RELATIONS_OUT, RELATIONS_IN):
                for e in dict.fromkeys(entities):
                    for s_, p_, o_, n in conn.execute(sql, (tenant.user, tenant.collection, e, docs, per_entity)):
                        found[(s_, p_, o_)] = int(n)
            return [RelationHit(*k, support=n) for k, n in found.items()]

        return await self.db.read(read)

    async def relation_chunks(
        self, q: ChunkQuery, relations: Sequence[tuple[str, str, str]], per_relation: int
    ) -> list[RelationChunk]:
        """Source chunks of relations in the scope, at most `per_relation` each."""
        if not relations:
            return []

        def read(conn: sqlite3.Connection) -> list[RelationChunk]:
            allowed = scoped_ids(conn, q.tenant)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            args = (q.tenant.user, q.tenant.collection, json.dumps([list(r) for r in relations]), per_relation, docs)
            return [RelationChunk((s, p, o), c) for s, p, o, c in conn.execute(relation_rows.SOURCE_CHUNKS, args)]

        return await self.db.read(read)

    async def relation_contexts(
        self, tenant: Tenant, relations: Sequence[tuple[str, str, str]], per_relation: int
    ) -> dict[tuple[str, str, str], list[float]]:
        """Each relation's context: the mean vector of its first `per_relation` source chunks in scope."""
        if not relations:
            return {}

        def read(conn: sqlite3.Connection) -> dict[tuple[str, str, str], list[float]]:
            allowed = scoped_ids(conn, tenant)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            args = (tenant.user, tenant.collection, json.dumps([list(r) for r in relations]), per_relation, docs)
            vecs: dict[tuple[str, str, str], list[np.ndarray]] = {}
            for s_, p_, o_, v in conn.execute(relation_rows.SOURCE_VECTORS, args):
                vecs.setdefault((s_, p_, o_), []).append(vec_of(v))
            return {k: np.mean(vs, axis=0).tolist() for k, vs in vecs.items()}

        return await self.db.read(read)

    async def episodes(
        self, q: ChunkQuery, entities: Sequence[str], chunk_ids: Sequence[str], window: tuple[float, float] | None
    ) -> Episodes:
        """What the chunks mention (in scope) and each entity's episodes in the window (see
        `EPISODES`, `EPISODE_COUNTS`)."""
        user, collection = q.tenant.user, q.tenant.collection

        def read(conn: sqlite3.Connection, allowed: set[str] | None, _: int | None) -> Episodes:
            docs = None if allowed is None else json.dumps(sorted(allowed))
            mentioned: dict[str, list[str]] = {}
            if chunk_ids:
                for e, c, _ in conn.execute(CHUNK_LINKS, (user, collection, json.dumps(list(chunk_ids)), docs)):
                    mentioned.setdefault(c, []).append(e)
            if window is None:
                return Episodes(mentioned, {})
            wanted = list(dict.fromkeys([*entities, *(e for es in mentioned.values() for e in es)]))
            episodes = [r[0] for r in conn.execute(EPISODES, (user, collection, *window, docs))] if wanted else []
            if not episodes:
                return Episodes(mentioned, {})
            args = (user, collection, json.dumps(wanted), json.dumps(episodes))
            return Episodes(mentioned, {str(e): int(n) for e, n in conn.execute(EPISODE_COUNTS, args)})

        return await self._read(q.tenant, read)

    async def chunk_similarities(self, q: ChunkQuery, chunk_ids: Sequence[str]) -> dict[str, float]:
        """Cosine of the question's vector to the stored vectors of the chunks (in scope)."""
        unit = _unit(q.vector)
        return await self._read(
            q.tenant,
            lambda conn, _, scoped: passages.similarities(conn, q.tenant, unit, chunk_ids, scoped),
        )  # fmt: skip

    async def scoped_entities(self, tenant: Tenant) -> set[str]:
        """Entities a chunk in the scope mentions."""

        def read(conn: sqlite3.Connection) -> set[str]:
            allowed = scoped_ids(conn, tenant)
            if allowed is None:
                raise ValueError("scoped_entities needs a scope that narrows")
            args = (tenant.user, tenant.collection, json.dumps(sorted(allowed)))
            return {r[0] for r in conn.execute(SCOPED_ENTITIES, args)}

        return await self.db.read(read)

    async def scoped_neighbours(
        self, tenant: Tenant, entities: Sequence[str], limit_per_entity: int
    ) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
        """Relation edges touching `entities` with a source chunk in the scope: (raw edge, the
        entity it was found from), out-edges first, each entity's in key order."""

        def read(conn: sqlite3.Connection) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
            allowed = scoped_ids(conn, tenant)
            docs = json.dumps(sorted(allowed or ()))
            found = []
            for sql in (SCOPED_OUT, SCOPED_IN):
                for e in dict.fromkeys(entities):
                    rows = conn.execute(sql, (tenant.user, tenant.collection, e, docs, limit_per_entity))
                    found += [((s_, p_, o_, 0, "", ""), e) for s_, p_, o_ in rows]
            return found

        return await self.db.read(read)

    async def documents(self, tenant: Tenant, limit: int) -> list[DocumentInfo]:
        """Documents in id order."""

        def read(conn: sqlite3.Connection) -> list[DocumentInfo]:
            allowed = scoped_ids(conn, tenant)
            rows = conn.execute(
                "SELECT id, title, chunks, content_hash, timestamp FROM documents"
                " WHERE user = ? AND collection = ? ORDER BY id",
                (tenant.user, tenant.collection),
            ).fetchall()
            picked = [r for r in rows if allowed is None or r[0] in allowed][:limit]
            return [DocumentInfo(id=i, title=t, chunks=n, content_hash=h, timestamp=ts) for i, t, n, h, ts in picked]

        return await self.db.read(read)

    async def counts(self, user: str) -> dict[str, DocumentCounts]:
        """Collection -> what it holds, for the user's collections that hold documents."""

        def read(conn: sqlite3.Connection) -> dict[str, DocumentCounts]:
            rows = conn.execute(
                "SELECT collection, count(*), coalesce(sum(chunks), 0) FROM documents WHERE user = ?"
                " GROUP BY collection",
                (user,),
            ).fetchall()
            return {c: DocumentCounts(int(d), int(n)) for c, d, n in rows}

        return await self.db.read(read)

    async def close(self) -> None:
        """Release connections."""
        await self.db.close()

    # --- internals ----------------------------------------------------------------------------
    async def _read(self, tenant: Tenant, fn: Callable[[sqlite3.Connection, set[str] | None, int | None], T]) -> T:
        """`fn(conn, the scope's documents, the scope flag)` in one read call, with the scope's
        documents in `temp.scope_docs` for its queries (None, None: no narrower scope)."""

        def read(conn: sqlite3.Connection) -> T:
            allowed = scoped_ids(conn, tenant)
            return fn(conn, allowed, passages.set_scope(conn, allowed))

        return await self.db.read(read)


def _unit(vector: Sequence[float] | None) -> np.ndarray:
    if vector is None:
        raise ValueError("this read ranks by the question's vector and none was given")
    q = np.asarray(vector, dtype=np.float32)
    return q / (np.linalg.norm(q) or 1.0)

"""Embedded document store: documents, chunks (text, offsets, vectors), chunk-entity mentions,
relation provenance and concept ownership in one SQLite file (`docs.db`), plus an in-memory
search index per collection (see chunk_index). Every query is scoped by user and collection,
and a request's scope (documents, metadata) is a predicate inside it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from processors.algorithms.passage_rank import PassageRankParams
from processors.stores.documents_protocol import DocumentRecord, RemovedLinks
from processors.stores.local.chunk_index import ChunkIndex, RelationIndex
from processors.stores.sqlite.docs_schema import (
    CHUNK_LINKS,
    CLAIM_CONCEPT,
    ENTITY_LINKS,
    EPISODE_COUNTS,
    EPISODES,
    GET_CHUNKS,
    RELATION_CHUNKS,
    RELATIONS_AMONG,
    SCHEMA,
    SCOPED_ENTITIES,
    SCOPED_IN,
    SCOPED_OUT,
    VERSION_CHECK_S,
    build_index,
    build_relation_index,
    bump,
    chunk,
    collection_version,
    delete_docs,
    insert_record,
    migrate,
    scoped_ids,
    unlinked,
)
from processors.stores.sqlite.pool import SqlitePool
from schemas.documents import Chunk, DocumentInfo, Mention, Scope, SearchMode


class SqliteDocumentStore:
    """DocumentStore on SQLite (see module docstring)."""

    def __init__(self, path: Path) -> None:
        self.db = SqlitePool(path, SCHEMA, migrate=migrate)
        self._index: dict[tuple[str, str], ChunkIndex] = {}
        self._relations: dict[tuple[str, str], RelationIndex] = {}
        self._checked: dict[tuple[str, str], float] = {}
        self._reload = asyncio.Lock()

    # --- writes -------------------------------------------------------------------------------
    async def store(self, user: str, collection: str, records: Sequence[DocumentRecord]) -> RemovedLinks:
        """Write documents (replacing earlier versions of the same ids) in one transaction; returns
        what the replaced versions linked that nothing links any more."""

        def write(conn: sqlite3.Connection) -> RemovedLinks:
            removed = delete_docs(conn, user, collection, [r.document.id for r in records])
            for r in records:
                insert_record(conn, user, collection, r)
            bump(conn, user, collection)
            return unlinked(conn, user, collection, removed)

        out = await self.db.write(write)
        self._checked.pop((user, collection), None)
        return out

    async def claim_concepts(self, user: str, collection: str, concepts: Mapping[str, str]) -> None:
        """Record these concepts (IRI -> key) as indexing's."""
        rows = [(user, collection, iri, key) for iri, key in concepts.items()]
        await self.db.write(lambda conn: conn.executemany(CLAIM_CONCEPT, rows))

    async def delete_documents(self, user: str, collection: str, ids: Sequence[str]) -> RemovedLinks:
        """Delete documents; returns the relations and owned concepts nothing links any more."""

        def write(conn: sqlite3.Connection) -> RemovedLinks:
            removed = delete_docs(conn, user, collection, list(ids))
            bump(conn, user, collection)
            return unlinked(conn, user, collection, removed)

        out = await self.db.write(write)
        self._checked.pop((user, collection), None)
        return out

    async def delete_collection(self, user: str, collection: str) -> None:
        """Drop every row of the collection."""

        def write(conn: sqlite3.Connection) -> None:
            for table in ("documents", "doc_meta", "chunks", "mentions", "relation_sources", "concepts"):
                conn.execute("DELETE FROM " + table + " WHERE user = ? AND collection = ?", (user, collection))
            bump(conn, user, collection)

        await self.db.write(write)
        self._index.pop((user, collection), None)

    # --- reads --------------------------------------------------------------------------------
    async def hashes(self, user: str, collection: str, ids: Sequence[str]) -> dict[str, str]:
        """Content hash of each stored document of `ids`."""
        sql = (
            "SELECT id, content_hash FROM documents WHERE user = ? AND collection = ?"
            " AND id IN (SELECT value FROM json_each(?))"
        )
        rows = await self.db.read(lambda c: c.execute(sql, (user, collection, json.dumps(list(ids)))).fetchall())
        return {str(i): str(h) for i, h in rows}

    async def search(
        self,
        user: str,
        collection: str,
        vector: Sequence[float] | None,
        text: str | None,
        mode: SearchMode,
        limit: int,
        scope: Scope | None = None,
        params: PassageRankParams | None = None,
        chunk_ids: Collection[str] | None = None,
    ) -> list[Chunk]:
        """The best chunks of the scope (and of `chunk_ids`, when given) by vector and/or text,
        or by graphrank (one store call)."""
        allowed = await self._allowed(user, collection, scope)
        index = await self._chunk_index(user, collection)
        if index is None or (allowed is not None and not allowed) or (chunk_ids is not None and not chunk_ids):
            return []
        mask = index.mask(allowed, chunk_ids)
        hits = await asyncio.to_thread(index.search, vector, text, mode, limit, mask, params)
        found = {c.id: c for c in await self.chunks(user, collection, [index.ids[i] for i, _ in hits])}
        return [found[index.ids[i]].model_copy(update={"score": s}) for i, s in hits if index.ids[i] in found]

    async def chunks(self, user: str, collection: str, ids: Sequence[str], scope: Scope | None = None) -> list[Chunk]:
        """Chunks by id (in the scope), in the order asked."""
        if not ids:
            return []

        def read(conn: sqlite3.Connection) -> list[Chunk]:
            allowed = scoped_ids(conn, user, collection, scope)
            rows = conn.execute(GET_CHUNKS, (user, collection, json.dumps(list(ids)))).fetchall()
            by_id = {r[0]: r for r in rows if allowed is None or r[1] in allowed}
            return [chunk(by_id[i]) for i in dict.fromkeys(ids) if i in by_id]

        return await self.db.read(read)

    async def links(
        self,
        user: str,
        collection: str,
        entities: Sequence[str],
        chunk_ids: Sequence[str],
        per_entity: int,
        scope: Scope | None = None,
    ) -> list[Mention]:
        """Chunk-entity links of a neighbourhood in one store call (see `ENTITY_LINKS`)."""

        def read(conn: sqlite3.Connection) -> list[Mention]:
            allowed = scoped_ids(conn, user, collection, scope)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            rows: list[tuple[str, str, int]] = []
            if entities:
                args = (user, collection, json.dumps(list(entities)), per_entity, docs)
                rows += conn.execute(ENTITY_LINKS, args).fetchall()
            if chunk_ids:
                rows += conn.execute(CHUNK_LINKS, (user, collection, json.dumps(list(chunk_ids)), docs)).fetchall()
            return [Mention(entity=e, chunk_id=c, count=n) for e, c, n in dict.fromkeys(rows)]

        return await self.db.read(read)

    async def relations(
        self, user: str, collection: str, entities: Sequence[str], limit: int, scope: Scope | None = None
    ) -> list[tuple[str, str, str, int]]:
        """Relations among `entities` with their in-scope support (chunks), strongest first."""

        def read(conn: sqlite3.Connection) -> list[tuple[str, str, str, int]]:
            allowed = scoped_ids(conn, user, collection, scope)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            return conn.execute(RELATIONS_AMONG, (user, collection, json.dumps(list(entities)), docs, limit)).fetchall()

        return await self.db.read(read)

    async def search_relations(
        self, user: str, collection: str, vector: Sequence[float], limit: int, scope: Scope | None = None
    ) -> list[tuple[str, str, str, float, int]]:
        """Relations nearest `vector` with a source chunk in the scope (exact, one store call)."""
        allowed = await self._allowed(user, collection, scope)
        index = await self._relation_index(user, collection)
        if index is None:
            return []
        hits = await asyncio.to_thread(index.search, vector, limit, allowed)
        return [(s, p, o, score, n) for (s, p, o), score, n in hits]

    async def relation_chunks(
        self,
        user: str,
        collection: str,
        relations: Sequence[tuple[str, str, str]],
        per_relation: int,
        scope: Scope | None = None,
    ) -> list[tuple[tuple[str, str, str], str]]:
        """Source chunks of relations in the scope, at most `per_relation` each."""
        if not relations:
            return []

        def read(conn: sqlite3.Connection) -> list[tuple[tuple[str, str, str], str]]:
            allowed = scoped_ids(conn, user, collection, scope)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            args = (user, collection, json.dumps([list(r) for r in relations]), per_relation, docs)
            return [((s, p, o), c) for s, p, o, c in conn.execute(RELATION_CHUNKS, args)]

        return await self.db.read(read)

    async def episodes(
        self,
        user: str,
        collection: str,
        entities: Sequence[str],
        chunk_ids: Sequence[str],
        window: tuple[float, float] | None,
        scope: Scope | None = None,
    ) -> tuple[dict[str, list[str]], dict[str, int]]:
        """What the chunks mention (from the search index, as chunk similarities are) and each
        entity's episodes in the window (see `EPISODES`, `EPISODE_COUNTS`)."""
        index = await self._chunk_index(user, collection) if chunk_ids else None

        def read(conn: sqlite3.Connection) -> tuple[dict[str, list[str]], dict[str, int]]:
            allowed = scoped_ids(conn, user, collection, scope)
            mentioned = index.mentioned(chunk_ids, allowed) if index is not None else {}
            if window is None:
                return mentioned, {}
            wanted = list(dict.fromkeys([*entities, *(e for es in mentioned.values() for e in es)]))
            docs = None if allowed is None else json.dumps(sorted(allowed))
            episodes = [r[0] for r in conn.execute(EPISODES, (user, collection, *window, docs))] if wanted else []
            if not episodes:
                return mentioned, {}
            args = (user, collection, json.dumps(wanted), json.dumps(episodes))
            return mentioned, {str(e): int(n) for e, n in conn.execute(EPISODE_COUNTS, args)}

        return await self.db.read(read)

    async def chunk_similarities(
        self, user: str, collection: str, vector: Sequence[float], chunk_ids: Sequence[str], scope: Scope | None = None
    ) -> dict[str, float]:
        """Cosine of `vector` to the stored vectors of the chunks (in scope), from the search index."""
        allowed = await self._allowed(user, collection, scope)
        index = await self._chunk_index(user, collection)
        if index is None or not chunk_ids:
            return {}
        return index.similarities(vector, chunk_ids, allowed)

    async def scoped_entities(self, user: str, collection: str, scope: Scope) -> set[str]:
        """Entities a chunk in the scope mentions."""

        def read(conn: sqlite3.Connection) -> set[str]:
            allowed = scoped_ids(conn, user, collection, scope)
            if allowed is None:
                raise ValueError("scoped_entities needs a scope that narrows")
            args = (user, collection, json.dumps(sorted(allowed)))
            return {r[0] for r in conn.execute(SCOPED_ENTITIES, args)}

        return await self.db.read(read)

    async def scoped_neighbours(
        self, user: str, collection: str, entities: Sequence[str], limit_per_entity: int, scope: Scope
    ) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
        """Relation edges touching `entities` with a source chunk in the scope: (raw edge, the
        entity it was found from), out-edges first, each entity's in key order."""

        def read(conn: sqlite3.Connection) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
            allowed = scoped_ids(conn, user, collection, scope)
            docs = json.dumps(sorted(allowed or ()))
            found = []
            for sql in (SCOPED_OUT, SCOPED_IN):
                for e in dict.fromkeys(entities):
                    rows = conn.execute(sql, (user, collection, e, docs, limit_per_entity))
                    found += [((s_, p_, o_, 0, "", ""), e) for s_, p_, o_ in rows]
            return found

        return await self.db.read(read)

    async def documents(self, user: str, collection: str, limit: int, scope: Scope | None = None) -> list[DocumentInfo]:
        """Documents in id order."""

        def read(conn: sqlite3.Connection) -> list[DocumentInfo]:
            allowed = scoped_ids(conn, user, collection, scope)
            rows = conn.execute(
                "SELECT id, title, chunks, content_hash, timestamp FROM documents"
                " WHERE user = ? AND collection = ? ORDER BY id",
                (user, collection),
            ).fetchall()
            picked = [r for r in rows if allowed is None or r[0] in allowed][:limit]
            return [DocumentInfo(id=i, title=t, chunks=n, content_hash=h, timestamp=ts) for i, t, n, h, ts in picked]

        return await self.db.read(read)

    async def counts(self, user: str) -> dict[str, tuple[int, int]]:
        """Collection -> (documents, chunks) for the user's collections that hold documents."""

        def read(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
            rows = conn.execute(
                "SELECT collection, count(*), coalesce(sum(chunks), 0) FROM documents WHERE user = ?"
                " GROUP BY collection",
                (user,),
            ).fetchall()
            return {c: (int(d), int(n)) for c, d, n in rows}

        return await self.db.read(read)

    async def close(self) -> None:
        """Release connections."""
        await self.db.close()

    # --- internals ----------------------------------------------------------------------------
    async def _allowed(self, user: str, collection: str, scope: Scope | None) -> set[str] | None:
        if scope is None or scope.is_empty:
            return None
        return await self.db.read(lambda c: scoped_ids(c, user, collection, scope))

    async def _relation_index(self, user: str, collection: str) -> RelationIndex | None:
        """The collection's relation index, rebuilt when the store's version moved."""
        key = (user, collection)
        version = await self.db.read(lambda c: collection_version(c, user, collection))
        if version == 0:
            return None
        cached = self._relations.get(key)
        if cached is None or cached.version != version:
            cached = self._relations[key] = await self.db.read(
                lambda c: build_relation_index(c, user, collection, version)
            )
        return cached

    async def _chunk_index(self, user: str, collection: str) -> ChunkIndex | None:
        """The collection's search index, rebuilt when the store's version moved (another
        process's writes are seen within VERSION_CHECK_S)."""
        key = (user, collection)
        cached, now = self._index.get(key), time.monotonic()
        if cached is not None and now - self._checked.get(key, 0.0) < VERSION_CHECK_S:
            return cached
        version = await self.db.read(lambda c: collection_version(c, user, collection))
        self._checked[key] = now
        if version == 0:
            return None
        async with self._reload:
            cached = self._index.get(key)
            if cached is None or cached.version != version:
                cached = self._index[key] = await self.db.read(lambda c: build_index(c, user, collection, version))
        return cached

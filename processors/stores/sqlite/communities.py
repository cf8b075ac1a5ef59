"""Embedded community store: communities, their members and chunks in the document store's
SQLite file (`docs.db`), a profile vector per community (searched through IVF lists, one space
per level: vector_lists.py), and lazily written summaries cached against the membership hash.
Every query is scoped by user and collection (and the scope)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from processors.stores.community_graph import PAGE, Change, CommunityGraph, GraphReader, Stale, mean_vector, pages
from processors.stores.documents_protocol import CommunityRecord
from processors.stores.sqlite import mention_rows
from processors.stores.sqlite.community_update import apply, level_space, read_stale
from processors.stores.sqlite.docs_schema import scoped_ids, vec_of
from processors.stores.sqlite.pool import SqlitePool, delete_tenant_rows
from processors.stores.sqlite.relation_rows import EDGES as GRAPH_EDGES
from processors.stores.sqlite.relation_rows import EDGES_AMONG as GRAPH_EDGES_AMONG
from processors.stores.sqlite.vector_lists import VectorLists
from schemas.communities import CommunityInfo
from schemas.tenant import Tenant

SCHEMA = """
CREATE TABLE IF NOT EXISTS communities (
    user TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, level INTEGER NOT NULL, parent TEXT,
    children TEXT NOT NULL, size INTEGER NOT NULL, chunks INTEGER NOT NULL, top_entities TEXT NOT NULL,
    top_chunks TEXT NOT NULL, vec BLOB NOT NULL, membership_hash TEXT NOT NULL, summary TEXT, summary_model TEXT,
    stale INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (user, collection, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS community_members (
    user TEXT NOT NULL, collection TEXT NOT NULL, entity TEXT NOT NULL, level INTEGER NOT NULL, community TEXT NOT NULL,
    PRIMARY KEY (user, collection, entity, level)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS community_members_c ON community_members(user, collection, community);
CREATE TABLE IF NOT EXISTS community_pending (
    user TEXT NOT NULL, collection TEXT NOT NULL, entity TEXT NOT NULL,
    PRIMARY KEY (user, collection, entity)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS community_chunks (
    user TEXT NOT NULL, collection TEXT NOT NULL, community TEXT NOT NULL, chunk_id TEXT NOT NULL,
    document_id TEXT NOT NULL, weight REAL NOT NULL,
    PRIMARY KEY (user, collection, community, chunk_id)
) WITHOUT ROWID;
"""
_COLS = "id, level, parent, children, size, chunks, top_entities, top_chunks, summary, summary_model, stale, vec"
SELECT_COMMUNITIES = (
    "SELECT " + _COLS + " FROM communities WHERE user = ? AND collection = ?"
    " AND (? IS NULL OR level = ?) AND (? IS NULL OR id IN (SELECT value FROM json_each(?)))"
    " ORDER BY size DESC, id"
)
Row = tuple[CommunityInfo, np.ndarray]  # a community and its profile vector
RESCORE = 4  # IVF hits read per community wanted, rescored exactly
WRITE_PAGE = 1000  # communities written at once
TABLES = ("communities", "community_members", "community_chunks", "community_pending")
CHUNK_DOCS = (
    "SELECT id, document_id FROM chunks WHERE user = ?1 AND collection = ?2 AND id IN (SELECT value FROM json_each(?3))"
)
CHUNK_VECTORS = (
    "SELECT id, vec FROM chunks WHERE user = ?1 AND collection = ?2 AND id IN (SELECT value FROM json_each(?3))"
)
LEVEL_SPACES = (
    "SELECT space FROM vector_spaces WHERE user = ? AND collection = ? AND space LIKE 'community-%' AND items > 0"
)


MARK_STALE = (
    "UPDATE communities SET stale = 1 WHERE user = ?1 AND collection = ?2 AND id IN (SELECT community"
    " FROM community_members WHERE user = ?1 AND collection = ?2 AND entity IN (SELECT value FROM json_each(?3)))"
)
MARK_PENDING = (
    "INSERT OR IGNORE INTO community_pending SELECT ?1, ?2, j.value FROM json_each(?3) j"
    " WHERE EXISTS (SELECT 1 FROM communities WHERE user = ?1 AND collection = ?2) AND NOT EXISTS (SELECT 1"
    " FROM community_members m WHERE m.user = ?1 AND m.collection = ?2 AND m.entity = j.value AND m.level = 0)"
)
# The mentions a build reads beside the co-occurrence graph (GRAPH_EDGES, from relation_rows: a
# relation's weight is the chunks supporting it); the AMONG pairs keep the subgraph between the
# entities of ?3 (a JSON list). Only these statements name the tables the graph comes from.
GRAPH_MENTIONS = mention_rows.OF_COLLECTION
GRAPH_MENTIONS_AMONG = mention_rows.OF_ENTITIES


class SqliteCommunityStore:
    """CommunityStore on the document store's SQLite pool."""

    def __init__(self, db: SqlitePool, lists: VectorLists) -> None:
        self.db, self.lists = db, lists
        db.ensure_schema(SCHEMA)

    async def graph(self, tenant: Tenant, entities: Sequence[str] | None = None) -> CommunityGraph:
        """What detection and profiles read (one store call), as arrays streamed a page of rows at a
        time: relation weights (chunks supporting each) and mentions; with `entities`, only the
        relations between them and their mentions (the subgraph an update re-clusters)."""
        only = None if entities is None else json.dumps(sorted(set(entities)))

        def read(conn: sqlite3.Connection) -> CommunityGraph:
            reader = GraphReader()
            among = only is not None
            args = (tenant.user, tenant.collection, only) if among else (tenant.user, tenant.collection)
            for page in _pages(conn.execute(GRAPH_EDGES_AMONG if among else GRAPH_EDGES, args)):
                reader.edges(page)
            for page in _pages(conn.execute(GRAPH_MENTIONS_AMONG if among else GRAPH_MENTIONS, args)):
                reader.mentions(page)
            return reader.graph()

        return await self.db.read(read)

    async def replace(self, tenant: Tenant, records: Iterable[CommunityRecord]) -> None:
        """Replace the collection's communities in one transaction, consuming `records` a page at a
        time (a build's records are made as they are written); a community whose membership did not
        change keeps its summary."""

        def write(conn: sqlite3.Connection) -> None:
            uc = (tenant.user, tenant.collection)
            kept = dict(
                ((h, (s, m)) for h, s, m in conn.execute(
                    "SELECT membership_hash, summary, summary_model FROM communities WHERE user = ? AND collection = ?"
                    " AND summary IS NOT NULL", uc))
            )  # fmt: skip
            delete_tenant_rows(conn, tenant, TABLES)
            for (space,) in conn.execute(LEVEL_SPACES, uc).fetchall():  # the previous build's vectors go
                self.lists.drop(conn, tenant, space)
            for page in pages(records, WRITE_PAGE):
                self._insert(conn, tenant, page, kept)

        await self.db.write(write)

    def _insert(
        self, conn: sqlite3.Connection, tenant: Tenant, page: Sequence[CommunityRecord],
        kept: dict[str, tuple[str | None, str | None]],
    ) -> None:  # fmt: skip
        """Write a page of communities: rows, members, chunks, profile vectors (in IVF lists, one
        space per level); a record without a vector gets the mean of its `vector_chunks`' vectors."""
        uc = (tenant.user, tenant.collection)
        held = json.dumps(sorted({c for r in page for c in r.chunks}))
        docs = dict(conn.execute(CHUNK_DOCS, (*uc, held)))
        wanted = json.dumps(sorted({c for r in page if not r.vector for c in r.vector_chunks}))
        vecs = dict(conn.execute(CHUNK_VECTORS, (*uc, wanted)))  # only the few each profile vector needs
        by_level: dict[int, list[tuple[str, str, np.ndarray]]] = {}
        for r in page:
            chosen = [vec_of(vecs[c]) for c in r.vector_chunks if c in vecs]
            vector = np.asarray(r.vector or mean_vector(chosen), dtype=np.float32)
            summary, model = kept.get(r.membership_hash, (None, None))
            conn.execute(
                "INSERT INTO communities VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,0)",
                (*uc, r.id, r.level, r.parent, json.dumps(r.children), len(r.members), len(r.chunks),
                 json.dumps(r.top_entities), json.dumps(r.top_chunks), vector.tobytes(), r.membership_hash,
                 summary, model),
            )  # fmt: skip
            conn.executemany(
                "INSERT INTO community_members VALUES (?,?,?,?,?)", [(*uc, m, r.level, r.id) for m in r.members]
            )
            conn.executemany(
                "INSERT INTO community_chunks VALUES (?,?,?,?,?,?)",
                [(*uc, r.id, c, docs[c], w) for c, w in r.chunks.items() if c in docs],
            )
            if len(vector):
                by_level.setdefault(r.level, []).append((r.id, "", vector))
        for level, items in by_level.items():
            self.lists.add(conn, tenant, level_space(level), items)

    async def mark_stale(self, tenant: Tenant, entities: Sequence[str]) -> None:
        """Flag the communities (every level) these entities belong to; once a build has made
        communities, those of no community are pending (the next update clusters them)."""
        args = (tenant.user, tenant.collection, json.dumps(list(entities)))

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(MARK_STALE, args)
            conn.execute(MARK_PENDING, args)

        await self.db.write(write)

    async def stale(self, tenant: Tenant) -> Stale | None:
        """The stale level-0 communities (members, ancestors) and the pending concepts; None when
        the collection has no communities."""
        return await self.db.read(lambda conn: read_stale(conn, tenant))

    async def update(self, tenant: Tenant, change: Change) -> None:
        """Apply an incremental update in one transaction (sqlite/community_update.py)."""
        await self.db.write(lambda conn: apply(conn, self.lists, tenant, change,
                                               lambda c, page, kept: self._insert(c, tenant, page, kept)))  # fmt: skip

    async def list(
        self,
        tenant: Tenant,
        level: int | None = None,
        ids: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[CommunityInfo]:
        """Communities of a level (or all), or by id, largest first; only those with a chunk in scope."""
        return [info for info, _ in await self._rows(tenant, level, ids)][:limit]

    async def search(
        self,
        tenant: Tenant,
        vector: Sequence[float],
        level: int | None,
        limit: int,
    ) -> list[CommunityInfo]:
        """Communities nearest `vector` (see `SearchCommunities` for how levels are chosen): the
        level's IVF lists, or exactly over the communities with a chunk in a narrowing scope."""
        q = np.asarray(vector, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)

        def read(conn: sqlite3.Connection) -> list[CommunityInfo]:
            allowed = _in_scope(conn, tenant)
            levels = sorted(
                {int(sp.rsplit("-", 1)[1]) for (sp,) in conn.execute(LEVEL_SPACES, (tenant.user, tenant.collection))}
            )
            if level is not None:
                return self._nearest(conn, tenant, level, q, limit, allowed)
            picked: list[CommunityInfo] = []
            for lv in reversed(levels):  # the top level first, then down
                picked = self._nearest(conn, tenant, lv, q, limit, allowed)
                if len(picked) >= max(1, limit // 2):
                    break
            return picked

        return await self.db.read(read)

    def _nearest(
        self, conn: sqlite3.Connection, tenant: Tenant, level: int, q: np.ndarray, limit: int,
        allowed: set[str] | None,
    ) -> list[CommunityInfo]:  # fmt: skip
        """The `limit` communities of `level` whose profile vectors are nearest `q` (exact over
        the IVF hits, or over `allowed`)."""
        if allowed is None:
            hits = self.lists.search(conn, tenant, level_space(level), q, RESCORE * limit)
            ids = [i for i, _ in hits]
        else:
            ids = sorted(allowed)
        if not ids:
            return []
        args = (tenant.user, tenant.collection, level, level, 1, json.dumps(ids))
        rows = [(_info(r), np.frombuffer(r[-1], dtype=np.float32)) for r in conn.execute(SELECT_COMMUNITIES, args)]
        return _best(rows, q, limit)

    async def _rows(self, tenant: Tenant, level: int | None, ids: Sequence[str] | None) -> list[Row]:
        def read(conn: sqlite3.Connection) -> list[Row]:
            allowed = _in_scope(conn, tenant)
            args = (
                tenant.user,
                tenant.collection,
                level,
                level,
                None if ids is None else 1,
                json.dumps(list(ids or [])),
            )
            rows = conn.execute(SELECT_COMMUNITIES, args).fetchall()
            return [
                (_info(r), np.frombuffer(r[-1], dtype=np.float32)) for r in rows if allowed is None or r[0] in allowed
            ]

        return await self.db.read(read)

    async def of_entities(self, tenant: Tenant, entities: Sequence[str], level: int) -> dict[str, str]:
        """Entity -> its community at `level`."""
        sql = (
            "SELECT entity, community FROM community_members WHERE user = ? AND collection = ? AND level = ?"
            " AND entity IN (SELECT value FROM json_each(?))"
        )
        args = (tenant.user, tenant.collection, level, json.dumps(list(entities)))
        return dict(await self.db.read(lambda c: c.execute(sql, args).fetchall()))

    async def member_chunks(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, list[str]]:
        """Community id -> the ids of its chunks, heaviest first."""
        sql = (
            "SELECT community, chunk_id FROM community_chunks WHERE user = ? AND collection = ?"
            " AND community IN (SELECT value FROM json_each(?)) ORDER BY community, weight DESC, chunk_id"
        )
        rows = await self.db.read(
            lambda c: c.execute(sql, (tenant.user, tenant.collection, json.dumps(list(ids)))).fetchall()
        )
        out: dict[str, list[str]] = {}
        for community, chunk_id in rows:
            out.setdefault(community, []).append(chunk_id)
        return out

    async def set_summary(self, tenant: Tenant, community: str, membership: str, summary: str, model: str) -> None:
        """Cache a summary (only if the community still has the membership it was written for)."""
        sql = (
            "UPDATE communities SET summary = ?, summary_model = ? WHERE user = ? AND collection = ? AND id = ?"
            " AND membership_hash = ?"
        )
        await self.db.write(
            lambda c: c.execute(sql, (summary, model, tenant.user, tenant.collection, community, membership))
        )

    async def membership(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, str]:
        """Community id -> membership hash."""
        sql = (
            "SELECT id, membership_hash FROM communities WHERE user = ? AND collection = ?"
            " AND id IN (SELECT value FROM json_each(?))"
        )
        args = (tenant.user, tenant.collection, json.dumps(list(ids)))
        return dict(await self.db.read(lambda c: c.execute(sql, args).fetchall()))

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop the collection's communities."""
        await self.db.write(lambda c: delete_tenant_rows(c, tenant, TABLES))

    async def close(self) -> None:
        """The pool belongs to the document store."""


def _pages(rows: sqlite3.Cursor) -> Iterator[list[tuple[object, ...]]]:
    """A cursor's rows a page at a time."""
    while page := rows.fetchmany(PAGE):
        yield page


def _in_scope(conn: sqlite3.Connection, tenant: Tenant) -> set[str] | None:
    docs = scoped_ids(conn, tenant)
    if docs is None:
        return None
    if not docs:
        return set()
    sql = (
        "SELECT DISTINCT community FROM community_chunks WHERE user = ? AND collection = ?"
        " AND document_id IN (SELECT value FROM json_each(?))"
    )
    return {r[0] for r in conn.execute(sql, (tenant.user, tenant.collection, json.dumps(sorted(docs))))}


def _info(r: tuple) -> CommunityInfo:  # type: ignore[type-arg]
    cid, level, parent, children, size, chunks, tops, top_chunks, summary, model, stale, _vec = r
    return CommunityInfo(
        id=cid, level=level, parent=parent, children=json.loads(children), size=size, chunks=chunks,
        top_entities=json.loads(tops), top_chunks=json.loads(top_chunks), summary=summary, summary_model=model,
        stale=bool(stale),
    )  # fmt: skip


def _best(rows: list[Row], q: np.ndarray, limit: int) -> list[CommunityInfo]:
    """The `limit` communities whose profile vectors are nearest `q`, with their scores."""
    scored = [(float(v @ q), info) for info, v in rows if len(v) == len(q)]
    scored.sort(key=lambda x: (-x[0], x[1].id))
    return [info.model_copy(update={"score": s}) for s, info in scored[:limit]]

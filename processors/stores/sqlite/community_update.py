"""An incremental community update on SQLite (processors/ingest/communities/update.py has the rule):
what it reads (`read_stale`) and how it writes (`apply`), every statement scoped by user and
collection. The ancestors' chunk weights change by the removed and added children's weights
(upserts), so an update never reads a whole ancestor's chunks into Python."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

import numpy as np

from processors.stores.community_graph import Change, CommunityRecord, Stale, mean_vector, parent_hash
from processors.stores.sqlite.docs_schema import vec_of
from processors.stores.sqlite.vector_lists import VectorLists
from schemas.tenant import Tenant

STALE_LEAVES = "SELECT id FROM communities WHERE user = ?1 AND collection = ?2 AND level = 0 AND stale = 1"
MEMBERS_OF = (
    "SELECT community, entity FROM community_members WHERE user = ?1 AND collection = ?2"
    " AND community IN (SELECT value FROM json_each(?3)) ORDER BY community, entity"
)
PARENTS = (
    "SELECT id, parent FROM communities WHERE user = ?1 AND collection = ?2 AND id IN (SELECT value FROM json_each(?3))"
)
PENDING = "SELECT entity FROM community_pending WHERE user = ?1 AND collection = ?2 ORDER BY entity"
ANY = "SELECT 1 FROM communities WHERE user = ?1 AND collection = ?2 LIMIT 1"
# Add (sign +1) or take away (sign -1) community ?4's chunk weights to ancestor ?3's.
MOVE_WEIGHTS = (
    "INSERT INTO community_chunks (user, collection, community, chunk_id, document_id, weight)"
    " SELECT user, collection, ?3, chunk_id, document_id, ?5 * weight FROM community_chunks"
    " WHERE user = ?1 AND collection = ?2 AND community = ?4"
    " ON CONFLICT (user, collection, community, chunk_id) DO UPDATE SET weight = weight + excluded.weight"
)
EMPTIED = "DELETE FROM community_chunks WHERE user = ?1 AND collection = ?2 AND community = ?3 AND weight < 0.5"
HEAVIEST = (
    "SELECT cc.chunk_id, c.vec FROM community_chunks cc JOIN chunks c ON c.user = cc.user"
    " AND c.collection = cc.collection AND c.id = cc.chunk_id WHERE cc.user = ?1 AND cc.collection = ?2"
    " AND cc.community = ?3 ORDER BY cc.weight DESC, cc.chunk_id LIMIT ?4"
)
COUNTS = (
    "SELECT (SELECT count(*) FROM community_members WHERE user = ?1 AND collection = ?2 AND community = ?3),"
    " (SELECT count(*) FROM community_chunks WHERE user = ?1 AND collection = ?2 AND community = ?3)"
)
ROW = "SELECT level, children, top_entities FROM communities WHERE user = ?1 AND collection = ?2 AND id = ?3"
HASHES = (
    "SELECT membership_hash, top_entities FROM communities WHERE user = ?1 AND collection = ?2"
    " AND id IN (SELECT value FROM json_each(?3)) ORDER BY size DESC, id"
)
STILL_MEMBERS = (
    "SELECT entity FROM community_members WHERE user = ?1 AND collection = ?2 AND community = ?3"
    " AND entity IN (SELECT value FROM json_each(?4))"
)
REFRESH = (
    "UPDATE communities SET children = ?4, size = ?5, chunks = ?6, top_entities = ?7, top_chunks = ?8, vec = ?9,"
    " membership_hash = ?10, summary = NULL, summary_model = NULL, stale = 0"
    " WHERE user = ?1 AND collection = ?2 AND id = ?3"
)
_IN = " WHERE user = ?1 AND collection = ?2 AND {} IN (SELECT value FROM json_each(?3))"
DROP_LEAVES = (
    "DELETE FROM communities" + _IN.format("id"),
    "DELETE FROM community_members" + _IN.format("community"),
    "DELETE FROM community_chunks" + _IN.format("community"),
)
KEPT = (
    "SELECT membership_hash, summary, summary_model FROM communities WHERE user = ?1 AND collection = ?2"
    " AND id IN (SELECT value FROM json_each(?3)) AND summary IS NOT NULL"
)
UNPEND = (
    "DELETE FROM community_pending WHERE user = ?1 AND collection = ?2 AND entity IN (SELECT value FROM json_each(?3))"
)
TOP_ENTITIES, TOP_CHUNKS, VECTOR_CHUNKS = 10, 5, 10
Insert = Callable[[sqlite3.Connection, Sequence[CommunityRecord], dict[str, tuple[str | None, str | None]]], None]


def level_space(level: int) -> str:
    """The vector space of one level's profile vectors."""
    return f"community-{level}"


def read_stale(conn: sqlite3.Connection, tenant: Tenant) -> Stale | None:
    """The stale level-0 communities with their members and ancestors, and the pending concepts."""
    uc = (tenant.user, tenant.collection)
    if conn.execute(ANY, uc).fetchone() is None:
        return None
    ids = [r[0] for r in conn.execute(STALE_LEAVES, uc)]
    members: dict[str, list[str]] = {i: [] for i in ids}
    for community, entity in conn.execute(MEMBERS_OF, (*uc, json.dumps(ids))):
        members[community].append(entity)
    return Stale(members, _ancestors(conn, uc, ids), [r[0] for r in conn.execute(PENDING, uc)])


def _ancestors(conn: sqlite3.Connection, uc: tuple[str, str], ids: list[str]) -> dict[str, list[str]]:
    """Each community's ancestors' ids, level 1 up (one statement per level)."""
    parent: dict[str, str | None] = {}
    todo = list(ids)
    while todo:
        rows = conn.execute(PARENTS, (*uc, json.dumps(todo))).fetchall()
        parent.update(rows)
        todo = sorted({p for _, p in rows if p and p not in parent})
    out = {}
    for i in ids:
        chain, at = [], parent.get(i)
        while at:
            chain.append(at)
            at = parent.get(at)
        out[i] = chain
    return out


def apply(conn: sqlite3.Connection, lists: VectorLists, tenant: Tenant, change: Change, insert: Insert) -> None:
    """Write an update (see the module docstring); `insert` writes a page of new communities."""
    uc = (tenant.user, tenant.collection)
    old = _ancestors(conn, uc, change.removed)
    gone = json.dumps(change.removed)
    kept = {h: (s, m) for h, s, m in conn.execute(KEPT, (*uc, gone))}  # a community found again keeps its summary
    for cid, chain in old.items():
        for a in chain:
            conn.execute(MOVE_WEIGHTS, (*uc, a, cid, -1.0))
    for sql in DROP_LEAVES:
        conn.execute(sql, (*uc, gone))
    lists.remove(conn, tenant, level_space(0), change.removed)
    insert(conn, change.added, kept)
    new = {r.id: change.ancestors.get(r.members[0], []) if r.members else [] for r in change.added}
    for cid, chain in new.items():
        for a in chain:
            conn.execute(MOVE_WEIGHTS, (*uc, a, cid, 1.0))
    for entity, chain in change.ancestors.items():
        conn.execute("DELETE FROM community_members WHERE user = ?1 AND collection = ?2 AND entity = ?3 AND level > 0",
                     (*uc, entity))  # fmt: skip
        conn.executemany("INSERT INTO community_members VALUES (?,?,?,?,?)",
                         [(*uc, entity, level, a) for level, a in enumerate(chain, 1)])  # fmt: skip
    touched = {a for chain in [*old.values(), *new.values()] for a in chain}
    added_under: dict[str | None, list[str]] = {r.parent: [] for r in change.added}
    for r in change.added:
        added_under[r.parent].append(r.id)
    for a in sorted(touched, key=lambda a: _level(conn, uc, a)):  # children before parents
        _refresh(conn, lists, tenant, a, set(change.removed), added_under.get(a, []))
    conn.execute(UNPEND, (*uc, json.dumps(sorted(change.ancestors))))


def _level(conn: sqlite3.Connection, uc: tuple[str, str], cid: str) -> int:
    row = conn.execute(ROW, (*uc, cid)).fetchone()
    return int(row[0]) if row else 0


def _refresh(
    conn: sqlite3.Connection, lists: VectorLists, tenant: Tenant, cid: str, removed: set[str], added: list[str]
) -> None:
    """An ancestor's children, counts, profile and membership hash after its descendants changed."""
    uc = (tenant.user, tenant.collection)
    row = conn.execute(ROW, (*uc, cid)).fetchone()
    if row is None:
        return
    level, children, tops = row[0], [c for c in json.loads(row[1]) if c not in removed] + added, json.loads(row[2])
    kids = conn.execute(HASHES, (*uc, json.dumps(children))).fetchall()
    candidates = list(dict.fromkeys(tops + [e for _, t in kids for e in json.loads(t)]))
    still = {r[0] for r in conn.execute(STILL_MEMBERS, (*uc, cid, json.dumps(candidates)))}
    conn.execute(EMPTIED, (*uc, cid))
    size, chunks = conn.execute(COUNTS, (*uc, cid)).fetchone()
    heavy = conn.execute(HEAVIEST, (*uc, cid, VECTOR_CHUNKS)).fetchall()
    vector = np.asarray(mean_vector([vec_of(v) for _, v in heavy]), dtype=np.float32)
    conn.execute(REFRESH, (*uc, cid, json.dumps(sorted(children)), size, chunks,
                           json.dumps([e for e in candidates if e in still][:TOP_ENTITIES]),
                           json.dumps([c for c, _ in heavy[:TOP_CHUNKS]]), vector.tobytes(),
                           parent_hash(h for h, _ in kids)))  # fmt: skip
    if len(vector):
        lists.add(conn, tenant, level_space(level), [(cid, "", vector)])

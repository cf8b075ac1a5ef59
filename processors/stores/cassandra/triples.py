"""TripleStore on Apache Cassandra 5 (schema: see schema.py; the entity index: entities.py).

A batched call (a neighbour frontier, a set of labels, a question's tokens) is one logical
round trip: one prepared query per partition, all in flight at once, gathered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from processors.algorithms.edges import NeighbourResult, RawEdge, edge_triple, rank_neighbours
from processors.algorithms.vectors import cosines
from processors.stores.cassandra.entities import CassandraEntityIndex
from processors.stores.cassandra.schema import (
    CassandraConnection,
    in_chunks,
)
from processors.stores.protocol import (
    EntityIndex,
    LoadState,
)
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.triples import NeighboursQuery

_ObjKey = tuple[str, bool, str, str]


def _obj(t: Term) -> _ObjKey:
    return (t.value, not t.is_iri, t.datatype or "", t.language or "")


def _obj_row(r: Any) -> _ObjKey:
    return (r.o, bool(r.o_lit), r.o_dt, r.o_lang)


def _raw(r: Any) -> RawEdge:
    return (r.s, r.p, r.o, bool(r.o_lit), r.o_dt or "", r.o_lang or "")


def _edges_call(q: NeighboursQuery, d: str, chunk: list[str], p: str | None) -> tuple[str, Sequence[Any]]:
    """The query reading, for each entity of `chunk`, its first edges in direction `d` (with predicate `p`)."""
    uc = (q.user, q.collection)
    if p is None:
        if d == "out":
            return "out_edges_in", (*uc, chunk, q.limit_per_entity)
        return "in_edges_in", (*uc, chunk, False, "", "", q.limit_per_entity)
    if d == "out":
        return "out_sp_in", (*uc, chunk, False, p, q.focus_limit)
    return "in_po_in", (*uc, chunk, False, "", "", False, p, q.focus_limit)


class CassandraTripleStore:
    """TripleStore on Cassandra. With an entity index, neighbour queries can score edges."""

    def __init__(self, conn: CassandraConnection, entity_index: EntityIndex | None = None) -> None:
        self.conn = conn.acquire()
        self.entity_index = entity_index

    async def add_triples(self, tenant: Tenant, triples: Sequence[Triple], replace_labels: bool = False) -> int:
        """Write each distinct triple to the out/in/predicate tables; returns how many were written.
        `replace_labels`: each IRI's last label of the batch replaces its stored one (read, then
        written: not atomic, unlike the SQLite and Neo4j stores; documents are stored on those)."""
        if replace_labels:
            triples = await self._replaced_labels(tenant, triples)
        uniq = list(dict.fromkeys((t.s.value, t.p.value, _obj(t.o)) for t in triples))
        calls: list[tuple[str, Sequence[Any]]] = []
        for s, p, (o, lit, dt, lang) in uniq:
            lbl = p == RDFS_LABEL
            calls.append(("ins_out", (tenant.user, tenant.collection, s, lbl, p, o, lit, dt, lang)))
            calls.append(("ins_in", (tenant.user, tenant.collection, o, lit, dt, lang, lbl, p, s)))
            calls.append(("ins_pred", (tenant.user, tenant.collection, p, s, o, lit, dt, lang)))
        for p in dict.fromkeys(p for _, p, _ in uniq):
            calls.append(("ins_predicate", (tenant.user, tenant.collection, p)))
        # Last label of an IRI in the batch wins (as in the SQLite store's INSERT OR REPLACE).
        labels: dict[str, str] = {}
        for t in triples:
            if t.p.value == RDFS_LABEL and not t.o.is_iri:
                labels[t.s.value] = t.o.value
        calls.extend(("ins_label", (tenant.user, tenant.collection, iri, label)) for iri, label in labels.items())
        calls.append(("ins_collection", (tenant.user, tenant.collection)))
        await self.conn.run_many(calls)
        return len(uniq)

    async def _replaced_labels(self, tenant: Tenant, triples: Sequence[Triple]) -> list[Triple]:
        """`triples` with each IRI's label triples cut to the batch's last; stored labels that differ
        from it are removed."""
        last = {t.s.value: t for t in triples if t.p.value == RDFS_LABEL and not t.o.is_iri}
        stored = await self.labels(tenant, list(last)) if last else {}
        old = [Triple(s=Term.iri(i), p=Term.iri(RDFS_LABEL), o=Term.literal(x))
               for i, x in stored.items() if x != last[i].o.value]  # fmt: skip
        if old:
            await self.remove_triples(tenant, old)
        keep = {id(t) for t in last.values()}
        return [t for t in triples if t.p.value != RDFS_LABEL or t.o.is_iri or id(t) in keep]

    async def remove_triples(self, tenant: Tenant, triples: Sequence[Triple]) -> None:
        """Delete each triple from the out/in/predicate tables (and its label, for label triples)."""
        calls: list[tuple[str, Sequence[Any]]] = []
        for t in dict.fromkeys(triples):
            o, lbl = _obj(t.o), t.p.value == RDFS_LABEL
            calls.append(("del_out_one", (tenant.user, tenant.collection, t.s.value, lbl, t.p.value, *o)))
            calls.append(("del_in_one", (tenant.user, tenant.collection, *o, lbl, t.p.value, t.s.value)))
            calls.append(("del_pred_one", (tenant.user, tenant.collection, t.p.value, t.s.value, *o)))
            if lbl:
                calls.append(("del_label", (tenant.user, tenant.collection, t.s.value)))
        await self.conn.run_many(calls)

    async def collections(self, user: str) -> dict[str, int]:
        """The user's collections; Cassandra cannot count a collection's rows cheaply: -1."""
        return {r.collection: -1 for r in await self.conn.run("collections", (user,), page_all=True)}

    async def pattern(self, tenant: Tenant, s: Term | None, p: Term | None, o: Term | None, limit: int) -> list[Triple]:
        """Triples matching a pattern, each shape served by the table whose key it binds."""
        if limit <= 0:
            return []
        uc = (tenant.user, tenant.collection)
        if s is not None and p is not None and o is not None:
            rows = await self.conn.run("out_spo", (*uc, s.value, p.value == RDFS_LABEL, p.value, *_obj(o)))
        elif s is not None and p is not None:
            rows = await self.conn.run("out_sp", (*uc, s.value, p.value == RDFS_LABEL, p.value, limit))
        elif s is not None and o is not None:  # an entity's out-edges, filtered by object here
            want = _obj(o)
            rows = [r for r in await self.conn.run("out_s_all", (*uc, s.value), page_all=True) if _obj_row(r) == want]
        elif s is not None:
            rows = await self.conn.run("out_s", (*uc, s.value, limit))
        elif o is not None and p is not None:
            rows = await self.conn.run("in_po", (*uc, *_obj(o), p.value == RDFS_LABEL, p.value, limit))
        elif o is not None:
            rows = await self.conn.run("in_o", (*uc, *_obj(o), limit))
        elif p is not None:
            rows = await self.conn.run("pred_p", (*uc, p.value, limit))
        else:
            preds = await self.conn.run("predicates", uc, page_all=True)
            pages = await self.conn.run_many([("pred_p", (*uc, r.p, limit)) for r in preds])
            rows = [r for page in pages for r in page]
        return [edge_triple(_raw(r)) for r in rows[:limit]]

    async def neighbours(self, q: NeighboursQuery) -> NeighbourResult:
        """Edges of the frontier: per direction one query per chunk of entities, reading each
        entity's first `limit_per_entity` edges (PER PARTITION LIMIT); then, for the entities
        that filled it, one query per focus predicate those rows may not hold all of. Clustering
        order is (predicate, far end), as the protocol asks; rows come back in frontier order,
        out-edges first."""
        frontier = list(dict.fromkeys(q.entities))
        dirs = [d for d in ("out", "in") if q.direction in ("both", d)]
        part = await self._read(q, {(d, None): frontier for d in dirs})
        preds = [p for p in dict.fromkeys(q.focus) if p != RDFS_LABEL] if q.focus_limit > 0 else []
        full = {d: [e for e in frontier if len(part.get((d, e, None), ())) >= q.limit_per_entity] for d in dirs}
        # Rows come in predicate order, so a focus predicate that sorts before the last row's has
        # every edge of the entity in those rows already (UTF-8 byte order is code point order).
        focus = {(d, p): [e for e in full[d] if p >= part[d, e, None][-1].p] for d in dirs for p in preds}
        if any(focus.values()):
            part.update(await self._read(q, focus))
        rows = [(r, e) for d in dirs for e in frontier for r in part.get((d, e, None), ())]
        rows += [(r, e) for d in dirs for e in full[d] for p in preds for r in part.get((d, e, p), ())]
        index = self.entity_index
        if isinstance(index, CassandraEntityIndex):  # one vector read per hop, paths included
            index = _HopVectors(index, {rel for rels in q.paths.values() for rel in rels})
        return await rank_neighbours(((_raw(r), e) for r, e in rows), len(rows), q, index)

    async def _read(
        self, q: NeighboursQuery, entities: dict[tuple[str, str | None], list[str]]
    ) -> dict[tuple[str, str, str | None], list[Any]]:
        """Rows of each (direction, entity, focus predicate or None) read, in clustering order,
        for the entities listed under each (direction, focus predicate or None)."""
        keys = [(d, p, chunk) for (d, p), es in entities.items() for chunk in in_chunks(es)]
        pages = await self.conn.run_many([_edges_call(q, d, chunk, p) for d, p, chunk in keys], page_all=True)
        out: dict[tuple[str, str, str | None], list[Any]] = defaultdict(list)
        for (d, p, _), page in zip(keys, pages, strict=True):
            for r in page:
                out[d, r.s if d == "out" else r.o, p].append(r)
        return out

    async def adjacent(self, tenant: Tenant, entities: Sequence[str], limit_per_entity: int) -> list[tuple[str, str]]:
        """The frontier's first edges as (s, o): the partition reads of `neighbours`, concurrent."""
        frontier = list(dict.fromkeys(entities))
        calls: list[tuple[str, Sequence[Any]]] = [
            ("out_edges", (tenant.user, tenant.collection, e, limit_per_entity)) for e in frontier
        ]
        calls += [("in_edges", (tenant.user, tenant.collection, e, False, "", "", limit_per_entity)) for e in frontier]
        pages = await self.conn.run_many(calls)
        return [(r.s, r.o) for page in pages for r in page if not r.o_lit and r.p != RDFS_LABEL]

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """Labels of many IRIs: one multi-partition query per chunk of keys."""
        pages = await self.conn.run_many(
            [("labels_in", (tenant.user, tenant.collection, c)) for c in in_chunks(list(dict.fromkeys(iris)))]
        )
        return {r.iri: r.label for page in pages for r in page}

    async def delete_collection(self, tenant: Tenant) -> None:
        """Find every partition of the collection through its predicates, then delete them."""
        uc = (tenant.user, tenant.collection)
        preds = [r.p for r in await self.conn.run("predicates", uc, page_all=True)]
        pages = await self.conn.run_many([("pred_all", (*uc, p)) for p in preds], page_all=True)
        rows = [r for page in pages for r in page]
        calls: list[tuple[str, Sequence[Any]]] = [("del_out", (*uc, s)) for s in {r.s for r in rows}]
        calls += [("del_in", (*uc, *o)) for o in {_obj_row(r) for r in rows}]
        calls += [("del_label", (*uc, s)) for s in {r.s for r in rows if r.p == RDFS_LABEL}]
        calls += [("del_pred", (*uc, p)) for p in preds]
        await self.conn.run_many(calls)
        await self.conn.run_many([("del_predicates", uc), ("del_collection", uc), ("del_load", uc)])

    async def load_state(self, tenant: Tenant) -> LoadState | None:
        rows = await self.conn.run("get_load", (tenant.user, tenant.collection))
        return LoadState(*rows[0]) if rows else None

    async def set_load_state(self, tenant: Tenant, state: LoadState) -> None:
        await self.conn.run("set_load", (tenant.user, tenant.collection, *state.row()))

    async def close(self) -> None:
        """Release the shared connection."""
        await self.conn.release()


class _HopVectors:
    """The entity index as one neighbour query ranks with it: the vectors of the edges' ends and
    predicates and of the relations on the frontier's paths are read in one query, cosines are
    taken here, and the path scoring's vectors come from the same read."""

    def __init__(self, index: CassandraEntityIndex, path_relations: Iterable[str]) -> None:
        self.index = index
        self.extra = list(path_relations)
        self.asked: set[str] = set()
        self.got: dict[str, np.ndarray] = {}

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, np.ndarray]:
        want = [i for i in dict.fromkeys([*iris, *self.extra]) if i not in self.asked]
        if want:
            self.asked.update(want)
            self.got.update(await self.index.arrays(tenant, want))
        return {i: self.got[i] for i in iris if i in self.got}

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        return cosines(vector, iris, await self.vectors(tenant, iris))

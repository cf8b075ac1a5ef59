"""TripleStore and EntityIndex on Neo4j 5 (model and schema: see neo4j_schema.py).

Every call is one Cypher query (or one write transaction): a BFS level is a single
`UNWIND $keys` query with a per-entity LIMIT inside `CALL { ... }`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from processors.algorithms.edges import NeighbourResult, RawEdge, edge_triple, rank_neighbours
from processors.algorithms.text_match import normalize
from processors.stores.neo4j.cypher import (
    ADD_IRI_EDGES,
    ADD_LITERAL_EDGES,
    CLAIM_VECTOR_MODEL,
    COLLECTIONS,
    DELETE_ENTITIES,
    DELETE_INDEX,
    DELETE_LOAD,
    DELETE_PREDICATES,
    DELETE_TRIPLES,
    FORGET_VECTOR_MODEL,
    GET_VECTOR_MODEL,
    INDEX_COLLECTIONS,
    NAMED,
    NEAREST_PREDICATES,
    NEIGHBOURS,
    PATTERN,
    PRUNE_ENTITIES,
    PRUNE_LITERALS,
    REMOVE_EDGES,
    REMOVE_LABELS,
    REPLACE_LABELS,
    SET_LABELS,
    SET_LOAD,
    SIMILARITIES,
    UNLOCK_LABELS,
    UPSERT,
    VECTORS,
)
from processors.stores.neo4j.entity_search import entity_search, labels_read, load_state_read
from processors.stores.neo4j.schema import (
    Neo4jConnection,
    Runner,
    collection_key,
    cypher_vector,
    entity_key,
    literal_key,
    stored_vector,
)
from processors.stores.protocol import EntityHit, EntityIndex, LoadState, VectorItem, VectorKind, VectorModel
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.triples import NeighboursQuery


class _HopVectors:
    """The label vectors one neighbour query ranks with, all read by that query: the cosine of
    each edge's far end (entities only) and, of the tenant's predicates on the edges and on the
    frontier's paths, vector and cosine (a predicate's wins, as in `similarities`)."""

    def __init__(self, rows: list[dict[str, Any]], predicates: list[dict[str, Any]]) -> None:
        self.sims: dict[str, float] = {}
        for r in rows:
            if r["sim"] is not None:
                self.sims[r["o"] if r["dir"] in (0, 2) else r["s"]] = float(r["sim"])
        self.sims.update({m["iri"]: float(m["sim"]) for m in predicates})
        self.vecs: dict[str, list[float]] = {m["iri"]: m["vec"] for m in predicates if m["vec"] is not None}

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        return {i: self.sims[i] for i in iris if i in self.sims}

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, list[float]]:
        return {i: self.vecs[i] for i in iris if i in self.vecs}


def _raw(r: dict[str, Any]) -> RawEdge:
    return (r["s"], r["p"], r["o"], bool(r["lit"]), r["dt"] or "", r["lang"] or "")


class Neo4jTripleStore:
    """TripleStore on Neo4j. With an entity index, neighbour queries can score edges."""

    def __init__(self, conn: Neo4jConnection, entity_index: EntityIndex | None = None) -> None:
        self.conn = conn.acquire()
        self.entity_index = entity_index

    async def add_triples(self, tenant: Tenant, triples: Sequence[Triple], replace_labels: bool = False) -> int:
        """MERGE nodes and edges in one transaction; returns the number of new edges (with
        `replace_labels`, each IRI's last label of the batch replaces its label: REPLACE_LABELS)."""
        iri_rows, lit_rows, label_rows = [], [], []
        replaced: dict[str, dict[str, str]] = {}
        for t in triples:
            sk = entity_key(tenant, t.s.value)
            row = {"sk": sk, "s": t.s.value, "p": t.p.value, "o": t.o.value}
            if t.o.is_iri:
                iri_rows.append({**row, "ok": entity_key(tenant, t.o.value)})
            else:
                dt, lang = t.o.datatype or "", t.o.language or ""
                ok = literal_key(tenant, t.o.value, dt, lang)
                if t.p.value == RDFS_LABEL and replace_labels:
                    replaced[sk] = {**row, "dt": dt, "lang": lang, "ok": ok}
                    continue
                lit_rows.append({**row, "dt": dt, "lang": lang, "ok": ok})
                if t.p.value == RDFS_LABEL:
                    label_rows.append({"sk": sk, "label": t.o.value})
        scope = {"user": tenant.user, "collection": tenant.collection}
        queries = [(ADD_IRI_EDGES, {**scope, **_iri_edges(iri_rows)}), (ADD_LITERAL_EDGES, {**scope, "rows": lit_rows})]
        queries.append((SET_LABELS, {"rows": label_rows}))
        rows = [replaced[k] for k in sorted(replaced)]  # one lock order for all writers: no deadlock
        queries += [(REPLACE_LABELS, {**scope, "rows": rows}), (UNLOCK_LABELS, {"rows": rows})]
        return await self.conn.write([(q, p) for q, p in queries if p["rows"]])

    async def pattern(self, tenant: Tenant, s: Term | None, p: Term | None, o: Term | None, limit: int) -> list[Triple]:
        """Triples matching a pattern (the MATCH starts from the most selective bound term)."""
        if limit <= 0:
            return []
        params: dict[str, Any] = {"user": tenant.user, "collection": tenant.collection, "limit": limit}
        ok = None
        if o is not None:
            dt, lang = o.datatype or "", o.language or ""
            ok = entity_key(tenant, o.value) if o.is_iri else literal_key(tenant, o.value, dt, lang)
        if s is not None:
            head = "s"
            params["sk"] = entity_key(tenant, s.value)
        elif o is not None:
            head = "o_iri" if o.is_iri else "o_lit"
        else:
            head = "p" if p is not None else "all"
        if p is not None:
            params["p"] = p.value
        if ok is not None:
            params["ok"] = ok
        rows = await self.conn.read_rows(PATTERN[head, p is not None, ok is not None], params)
        return [edge_triple(_raw(r)) for r in rows]

    async def neighbours(self, q: NeighboursQuery) -> NeighbourResult:
        """Edges of the whole frontier in one UNWIND query, LIMIT per entity and direction (and
        focus predicate), each part in key order as the protocol asks."""
        frontier = list(dict.fromkeys(q.entities))
        preds = [p for p in dict.fromkeys(q.focus) if p != RDFS_LABEL] if q.focus_limit > 0 else []
        params = {
            "keys": [entity_key(q.tenant, e) for e in frontier],
            "user": q.user,
            "collection": q.collection,
            "label": RDFS_LABEL,
            "lim": q.limit_per_entity,
            "focus": preds,
            "flim": q.focus_limit,
        }
        index = self.entity_index
        scored = isinstance(index, Neo4jEntityIndex) and q.query_vector is not None
        if not scored:
            rows = await self.conn.read_rows(NEIGHBOURS[q.direction, bool(preds), False], params)
        else:  # the far ends' cosines and the predicates' vectors come in the same round trip
            rels = sorted({rel for rels in q.paths.values() for rel in rels})
            params.update(vec=cypher_vector(q.query_vector or []), rels=rels)
            record = (await self.conn.read(NEIGHBOURS[q.direction, bool(preds), True], params))[0]
            rows = record["rows"]
            index = _HopVectors(rows, record["predicates"])
        rows.sort(key=lambda r: (r["dir"], r["i"]))  # out-edges first, in frontier order (as SQLite)
        found = ((_raw(r), frontier[r["i"]]) for r in rows)
        return await rank_neighbours(found, len(rows), q, index)

    async def adjacent(self, tenant: Tenant, entities: Sequence[str], limit_per_entity: int) -> list[tuple[str, str]]:
        """The frontier's first edges as (s, o): the UNWIND query of `neighbours`, no focus reads."""
        keys = [entity_key(tenant, e) for e in dict.fromkeys(entities)]
        params = {
            "keys": keys,
            "user": tenant.user,
            "collection": tenant.collection,
            "label": RDFS_LABEL,
            "lim": limit_per_entity,
        }
        rows = await self.conn.read_rows(NEIGHBOURS["both", False, False], params)
        return [(r["s"], r["o"]) for r in rows if not r["lit"]]

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """Labels of many IRIs in one UNWIND query."""
        return await labels_read(self.conn.read, tenant, iris)

    async def remove_triples(self, tenant: Tenant, triples: Sequence[Triple]) -> None:
        """Delete these edges (and labels, for label triples) in one transaction, and the ends the
        removal leaves holding nothing."""
        edges, labels, entity_ends, literal_ends = [], [], set(), set()
        for t in triples:
            sk = entity_key(tenant, t.s.value)
            entity_ends.add(sk)
            if t.o.is_iri:
                ok = entity_key(tenant, t.o.value)
                entity_ends.add(ok)
            else:
                ok = literal_key(tenant, t.o.value, t.o.datatype or "", t.o.language or "")
                literal_ends.add(ok)
                if t.p.value == RDFS_LABEL:
                    labels.append({"sk": sk, "label": t.o.value})
            edges.append({"sk": sk, "p": t.p.value, "ok": ok})
        scope = {"user": tenant.user, "collection": tenant.collection}
        statements = [
            (REMOVE_EDGES, {**scope, "rows": edges}, edges),
            (REMOVE_LABELS, {"rows": labels}, labels),
            (PRUNE_ENTITIES, {**scope, "keys": sorted(entity_ends)}, entity_ends),
            (PRUNE_LITERALS, {**scope, "keys": sorted(literal_ends)}, literal_ends),
        ]
        await self.conn.write([(q, p) for q, p, some in statements if some])

    async def collections(self, user: str) -> dict[str, int]:
        """The user's collections and their edge counts."""
        return {r["collection"]: int(r["n"]) for r in await self.conn.read(COLLECTIONS, {"user": user})}

    async def delete_collection(self, tenant: Tenant) -> None:
        """Delete the collection's edges, literals and labels (entity index data stays)."""
        for cypher in DELETE_TRIPLES:
            await self.conn.autocommit(cypher, {"user": tenant.user, "collection": tenant.collection})
        await self.conn.write([(DELETE_LOAD, {"key": collection_key(tenant)})])

    async def load_state(self, tenant: Tenant) -> LoadState | None:
        return await load_state_read(self.conn.read, tenant)

    async def set_load_state(self, tenant: Tenant, state: LoadState) -> None:
        params = {"key": collection_key(tenant), "user": tenant.user, "collection": tenant.collection}
        await self.conn.write([(SET_LOAD, {**params, "state": asdict(state)})])

    async def close(self) -> None:
        """Release the shared driver."""
        await self.conn.release()


class Neo4jEntityIndex:
    """EntityIndex on Neo4j: a vector index over entity embeddings and a full-text index over labels.

    The vector index is global, so a query over-fetches (`ANN_OVERFETCH` x limit candidates, a
    second time wider) and keeps the tenant's nodes; when that leaves fewer than `limit` hits and
    the index may hold more, an exact scan of the tenant's nodes (`vector.similarity.cosine`)
    answers instead.
    """

    def __init__(self, conn: Neo4jConnection) -> None:
        self.conn = conn.acquire()

    async def upsert(
        self, tenant: Tenant, items: Sequence[VectorItem], kind: VectorKind = "entity", *, model: str
    ) -> None:
        """Set label, normalized search text and embedding on each entity (or predicate) node, in
        one transaction with the check of the collection's model (the first write records it)."""
        offered = VectorModel.of(items, model)
        offered.require_dimensions("Neo4j")
        rows = [
            {
                "key": entity_key(tenant, iri),
                "iri": iri,
                "label": lab,
                "text": normalize(lab),
                "vec": cypher_vector(v),
            }
            for iri, lab, v in items
        ]
        if not rows:
            return
        scope = {"user": tenant.user, "collection": tenant.collection}

        async def write(run: Runner) -> None:
            claim = {**scope, "key": collection_key(tenant), "model": offered.name,
                     "dimensions": offered.dimensions}  # fmt: skip
            (held,) = await run(CLAIM_VECTOR_MODEL, claim)
            offered.require(tenant.collection, VectorModel(held["model"], held["dimensions"]))
            await run(UPSERT[kind], {**scope, "rows": rows})

        await self.conn.write_tx(write)

    async def vector_model(self, tenant: Tenant) -> VectorModel | None:
        """The model the collection's first vector write recorded."""
        rows = await self.conn.read(GET_VECTOR_MODEL, {"key": collection_key(tenant)})
        return VectorModel(rows[0]["model"], rows[0]["dimensions"]) if rows else None

    async def search(
        self, tenant: Tenant, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        """Lexical whole-label hits first (longer labels first), then nearest entities by cosine
        (entity_search.py)."""
        return await entity_search(self.conn.read, tenant, vector, text, limit)

    async def nearest_predicates(self, tenant: Tenant, vector: Sequence[float], limit: int) -> list[EntityHit]:
        """Exact cosine over the collection's predicate nodes (a handful to thousands)."""
        vec = stored_vector(vector)
        if limit <= 0 or vec is None:
            return []
        scope = {"user": tenant.user, "collection": tenant.collection, "vec": vec, "limit": limit}
        rows = await self.conn.read_rows(NEAREST_PREDICATES, scope)
        hits = [EntityHit(r["iri"], r["label"] or "", float(r["sim"])) for r in rows]
        return sorted(hits, key=lambda h: (-h.score, h.iri))

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors of entities and predicates, one UNWIND query."""
        keys = [entity_key(tenant, i) for i in dict.fromkeys(iris)]
        if not keys:
            return {}
        rows = await self.conn.read_rows(VECTORS, {"keys": keys, "user": tenant.user, "collection": tenant.collection})
        return {r["iri"]: r["vec"] for r in rows}

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        """Cosines computed by the server (one query; no vectors cross the wire)."""
        keys = [entity_key(tenant, i) for i in dict.fromkeys(iris)]
        if not keys:
            return {}
        params = {"keys": keys, "user": tenant.user, "collection": tenant.collection, "vec": cypher_vector(vector)}
        return {r["iri"]: float(r["sim"]) for r in await self.conn.read_rows(SIMILARITIES, params)}

    async def named(self, tenant: Tenant, names: Sequence[str]) -> dict[str, str]:
        """Entities by normalised label (`search_text`, indexed), one query."""
        params = {"names": list(dict.fromkeys(names)), "user": tenant.user, "collection": tenant.collection}
        return {r["name"]: r["iri"] for r in await self.conn.read_rows(NAMED, params)} if names else {}

    async def delete(self, tenant: Tenant, iris: Sequence[str]) -> None:
        """Drop the entities' index properties (bare nodes go) and predicate nodes of these IRIs."""
        params = {"keys": [entity_key(tenant, i) for i in iris], "user": tenant.user, "collection": tenant.collection}
        model = {**params, "mkey": collection_key(tenant)}
        await self.conn.write([(DELETE_ENTITIES, params), (DELETE_PREDICATES, params), (FORGET_VECTOR_MODEL, model)])

    async def collections(self, user: str) -> dict[str, int]:
        """The user's collections and how many entities each indexes."""
        return {r["collection"]: int(r["n"]) for r in await self.conn.read(INDEX_COLLECTIONS, {"user": user})}

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop predicate nodes and the index properties of entity nodes (nodes left bare are deleted)."""
        for cypher in DELETE_INDEX:
            await self.conn.autocommit(cypher, {"user": tenant.user, "collection": tenant.collection})

    async def close(self) -> None:
        """Release the shared driver."""
        await self.conn.release()


def _iri_edges(rows: list[dict[str, str]]) -> dict[str, list[dict[str, Any]]]:
    """ADD_IRI_EDGES' parameters: its entities once each, in key order, and each edge's ends and
    predicate, the ends by position among them."""
    iris = {row["sk"]: row["s"] for row in rows} | {row["ok"]: row["o"] for row in rows}
    nodes = [{"key": k, "iri": iris[k]} for k in sorted(iris)]
    at = {n["key"]: i for i, n in enumerate(nodes)}
    return {"nodes": nodes, "rows": [{"s": at[row["sk"]], "o": at[row["ok"]], "p": row["p"]} for row in rows]}

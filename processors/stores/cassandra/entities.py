"""EntityIndex on Apache Cassandra 5: SAI vector ANN within the tenant partition plus a token table
(schema: see schema.py).

A batched call (a set of IRIs, a question's tokens) is one logical round trip: one prepared query
per partition, all in flight at once, gathered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from processors.algorithms.entities import rank_entity_hits
from processors.algorithms.text_match import content_tokens, label_match_score, normalize
from processors.algorithms.vectors import cosines
from processors.stores.cassandra.schema import (
    VECTOR_WRITE_CONCURRENCY,
    VECTOR_WRITE_RETRIES,
    CassandraConnection,
    in_chunks,
    raw_vector,
    vector_array,
)
from processors.stores.protocol import (
    VECTOR_DIMENSIONS,
    EntityHit,
    VectorItem,
    VectorKind,
    VectorModel,
)
from schemas.tenant import Tenant

LEXICAL_CANDIDATES = 200


def _lexical_hits(rows: Iterable[Any], toks: Sequence[str], text: str) -> dict[str, EntityHit]:
    """The entities of token rows whose whole label the text contains, in the text's token order."""
    by_token: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        by_token[r.tok].append(r)
    hits: dict[str, EntityHit] = {}
    for r in (r for tok in toks for r in by_token[tok]):
        if r.iri not in hits and (score := label_match_score(r.label, text)) >= 1.0:
            hits[r.iri] = EntityHit(r.iri, r.label, score, lexical=True)
    return hits


class CassandraEntityIndex:
    """EntityIndex on Cassandra: SAI vector ANN within the tenant partition plus a token table."""

    def __init__(self, conn: CassandraConnection) -> None:
        self.conn = conn.acquire()

    async def upsert(
        self, tenant: Tenant, items: Sequence[VectorItem], kind: VectorKind = "entity", *, model: str
    ) -> None:
        """Store vectors (of the collection's model, see `_claim`); for entities also (re)index the
        label's content tokens."""
        await self._claim(tenant, VectorModel.of(items, model))
        latest = {iri: (label, np.asarray(v, dtype=np.float32)) for iri, label, v in items}
        calls: list[tuple[str, Sequence[Any]]] = []
        if kind == "entity":
            olds = await self.conn.run_many(
                [("vec_labels", (tenant.user, tenant.collection, kind, c)) for c in in_chunks(list(latest))]
            )
            for r in (r for page in olds for r in page):
                stale = set(content_tokens(r.label)) - set(content_tokens(latest[r.iri][0]))
                calls += [("del_token", (tenant.user, tenant.collection, tok, r.iri)) for tok in stale]
                if normalize(r.label) != normalize(latest[r.iri][0]):
                    calls.append(("del_name", (tenant.user, tenant.collection, normalize(r.label), r.iri)))
            for iri, (label, _) in latest.items():
                calls += [
                    ("ins_token", (tenant.user, tenant.collection, tok, iri, label)) for tok in content_tokens(label)
                ]
                calls.append(("ins_name", (tenant.user, tenant.collection, normalize(label), iri)))
        vec_calls = [
            ("ins_vec", (tenant.user, tenant.collection, kind, iri, lab, vec.tolist(), raw_vector(vec)))
            for iri, (lab, vec) in latest.items()
        ]
        await self.conn.run_many(calls)
        await self.conn.run_many(vec_calls, concurrency=VECTOR_WRITE_CONCURRENCY, write_retries=VECTOR_WRITE_RETRIES)

    async def _claim(self, tenant: Tenant, offered: VectorModel) -> None:
        """Refuse vectors the collection cannot hold: another model's than it holds (the first
        write records its model with a lightweight transaction, so two first writers cannot both
        win), or another dimension than the vector column's."""
        offered.require_dimensions("Cassandra")
        held = await self.vector_model(tenant)
        if held is None:
            (row,) = await self.conn.run(
                "claim_vector_model", (tenant.user, tenant.collection, offered.name, offered.dimensions)
            )
            held = offered if row.applied else VectorModel(row.model, row.dimensions)
        offered.require(tenant.collection, held)

    async def vector_model(self, tenant: Tenant) -> VectorModel | None:
        """The model the collection's first vector write recorded."""
        rows = await self.conn.run("get_vector_model", (tenant.user, tenant.collection))
        return VectorModel(rows[0].model, rows[0].dimensions) if rows else None

    async def search(
        self, tenant: Tenant, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        """ANN hits and whole-label lexical hits, ranked like LocalEntityIndex.search."""
        if limit <= 0:
            return []
        toks = content_tokens(text) if text else []
        # one query for every token's partition: a request costs ~1 ms of client CPU in the driver
        lexical: tuple[str, Sequence[Any]] = ("tokens", (tenant.user, tenant.collection, toks, LEXICAL_CANDIDATES))
        calls = [lexical] if toks else []
        q = np.asarray(vector, dtype=np.float32) if vector is not None else None
        qnorm = float(np.linalg.norm(q)) if q is not None else 0.0
        if q is not None and qnorm > 0:  # Cassandra rejects zero vectors for cosine
            calls.append(("vec_ann", (tenant.user, tenant.collection, "entity", [float(x) for x in q], limit)))
        pages = await self.conn.run_many(calls)
        hits = _lexical_hits(pages.pop(0) if toks else [], toks, text or "")
        if pages and pages[0]:  # the ANN's page
            ann = pages[0]
            m = await self._matrix(tenant, ann)
            norms = np.linalg.norm(m, axis=1, keepdims=True)
            sims = (m / np.where(norms == 0, 1, norms)) @ (q / qnorm)  # type: ignore[operator]
            for i in np.argsort(-sims, kind="stable"):
                r = ann[i]
                if r.iri not in hits:
                    hits[r.iri] = EntityHit(r.iri, r.label, float(sims[i]))
        return rank_entity_hits(list(hits.values()), limit)

    async def nearest_predicates(self, tenant: Tenant, vector: Sequence[float], limit: int) -> list[EntityHit]:
        """ANN over the collection's predicate partition (over-fetched), re-scored exactly."""
        q = np.asarray(vector, dtype=np.float32)
        qnorm = float(np.linalg.norm(q))
        if limit <= 0 or qnorm == 0:  # Cassandra rejects zero vectors for cosine
            return []
        k = max(4 * limit, 32)
        rows = await self.conn.run("vec_ann", (tenant.user, tenant.collection, "predicate", [float(x) for x in q], k))
        m = await self._matrix(tenant, rows)
        sims = cosines(q, [r.iri for r in rows], dict(zip((r.iri for r in rows), m, strict=True)))
        hits = [EntityHit(r.iri, r.label, sims[r.iri]) for r in rows if r.iri in sims]
        return sorted(hits, key=lambda h: (-h.score, h.iri))[:limit]

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors (entities or predicates), IN-lists of keys queried concurrently."""
        return {iri: v.tolist() for iri, v in (await self.arrays(tenant, iris)).items()}

    async def arrays(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors as float32 arrays: what scoring multiplies (a list of 384 Python floats
        per vector, made and then turned back into an array, was ~10 % of a Cassandra question's CPU)."""
        rows = await self._vector_rows(tenant, list(dict.fromkeys(iris)))
        return {iri: vector_array(raw) for iri, raw in rows.items()}

    async def _vector_rows(self, tenant: Tenant, iris: list[str]) -> dict[str, bytes]:
        """`vec_raw` of each IRI that has a vector (read from `vec` for rows written before it existed)."""
        kinds = ["entity", "predicate"]
        pages = await self.conn.run_many(
            [("vec_get", (tenant.user, tenant.collection, kinds, c)) for c in in_chunks(iris)]
        )
        found = {r.iri: r.vec_raw for page in pages for r in page}
        legacy = [i for i, raw in found.items() if raw is None]
        if legacy:
            pages = await self.conn.run_many(
                [("vec_get_legacy", (tenant.user, tenant.collection, kinds, c)) for c in in_chunks(legacy)]
            )
            found.update({r.iri: raw_vector(r.vec) for page in pages for r in page})
        return found

    async def _matrix(self, tenant: Tenant, rows: Sequence[Any]) -> np.ndarray:
        """The vectors of ANN result rows as one float32 matrix (row order kept)."""
        raws = [r.vec_raw for r in rows]
        if any(raw is None for raw in raws):  # rows written before vec_raw existed
            legacy = await self._vector_rows(tenant, [r.iri for r, raw in zip(rows, raws, strict=True)
                                                                if raw is None])  # fmt: skip
            raws = [raw if raw is not None else legacy[r.iri] for r, raw in zip(rows, raws, strict=True)]
        return np.frombuffer(b"".join(raws), dtype=">f4").reshape(len(raws), VECTOR_DIMENSIONS).astype(np.float32)

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        """Cosines from the stored vectors (fetched in one query)."""
        return cosines(vector, iris, await self.arrays(tenant, iris))

    async def named(self, tenant: Tenant, names: Sequence[str]) -> dict[str, str]:
        """Entities by normalised label: one single-partition query per name, concurrently."""
        uniq = list(dict.fromkeys(names))
        pages = await self.conn.run_many([("named", (tenant.user, tenant.collection, n)) for n in uniq])
        return {n: page[0].iri for n, page in zip(uniq, pages, strict=True) if page}

    async def delete(self, tenant: Tenant, iris: Sequence[str]) -> None:
        """Drop the entities' vectors, tokens and names (their labels are read first)."""
        rows = await self.conn.run_many(
            [("vec_labels", (tenant.user, tenant.collection, "entity", c)) for c in in_chunks(list(iris))]
        )
        calls: list[tuple[str, Sequence[Any]]] = []
        for r in (r for page in rows for r in page):
            calls += [("del_token", (tenant.user, tenant.collection, tok, r.iri)) for tok in content_tokens(r.label)]
            calls.append(("del_name", (tenant.user, tenant.collection, normalize(r.label), r.iri)))
        calls += [
            ("del_vec", (tenant.user, tenant.collection, kind, i)) for i in iris for kind in ("entity", "predicate")
        ]
        await self.conn.run_many(calls)
        if not await self.conn.run("any_vector", (tenant.user, tenant.collection)):  # the model goes with the last
            await self.conn.run("del_vector_model", (tenant.user, tenant.collection))

    async def collections(self, user: str) -> dict[str, int]:
        """The user's collections (the triple store's table) with their entity counts (one partition each)."""
        names = [r.collection for r in await self.conn.run("collections", (user,), page_all=True)]
        pages = await self.conn.run_many([("count_entities", (user, c)) for c in names])
        return {c: int(page[0].count) for c, page in zip(names, pages, strict=True) if page}

    async def delete_collection(self, tenant: Tenant) -> None:
        """Delete the collection's token and name partitions (from its labels) and both vector partitions."""
        rows = await self.conn.run("vec_all_labels", (tenant.user, tenant.collection, "entity"), page_all=True)
        toks = {tok for r in rows for tok in content_tokens(r.label)}
        calls: list[tuple[str, Sequence[Any]]] = [("del_token_part", (tenant.user, tenant.collection, t)) for t in toks]
        calls += [("del_name_part", (tenant.user, tenant.collection, n)) for n in {normalize(r.label) for r in rows}]
        calls += [("del_vec_kind", (tenant.user, tenant.collection, k)) for k in ("entity", "predicate")]
        calls.append(("del_vector_model", (tenant.user, tenant.collection)))
        await self.conn.run_many(calls)

    async def close(self) -> None:
        """Release the shared connection."""
        await self.conn.release()

"""Relation search without relation vectors: a relation keeps no vector of its own (issue 38: the
stored 384 floats per co-occurrence were 40% of docs.db). The question's nearest entities (of the
scope's, when a scope narrows) are the seeds; the store reads the relations touching them (one
call); each is scored by the cosine of the question with v_s + v_o + c — its two ends' label
vectors and the mean vector of its first source chunks (two more calls, together): the vector
relations used to store, computed when asked from what is stored anyway."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import numpy as np

from processors.stores.documents_protocol import DocumentStore, RelationHit
from processors.stores.protocol import EntityIndex
from schemas.tenant import Tenant

SEEDS = 48  # nearest entities whose relations are scored (at least the limit asked)
PER_ENTITY = 32  # relations read per seed, as subject and as object, most supported first
CONTEXT_CHUNKS = 4  # source chunks (first by id) whose mean vector is a relation's context


async def search_relations(
    entities: EntityIndex, documents: DocumentStore, tenant: Tenant, vector: Sequence[float], limit: int
) -> list[RelationHit]:
    """The `limit` relations with a source in scope nearest `vector` (see `rank_relations`)."""
    seeds = await _seeds(entities, documents, tenant, vector, max(SEEDS, limit))
    found = await documents.relations_of(tenant, seeds, PER_ENTITY) if seeds else []
    if not found:
        return []
    ends = sorted({x for h in found for x in (h.s, h.o)})
    vectors, contexts = await asyncio.gather(
        entities.vectors(tenant.unscoped, ends),
        documents.relation_contexts(tenant, [(h.s, h.p, h.o) for h in found], CONTEXT_CHUNKS),
    )
    return rank_relations(vector, found, vectors, contexts, limit)


async def _seeds(
    entities: EntityIndex, documents: DocumentStore, tenant: Tenant, vector: Sequence[float], k: int
) -> list[str]:
    """The `k` entities nearest `vector`: of the collection, or of the entities a narrowing scope's
    chunks mention (a collection-wide seed may have no relation in the scope)."""
    if tenant.scope is None or tenant.scope.is_empty:
        return [h.iri for h in await entities.search(tenant.unscoped, vector, None, k)]
    inside = await documents.scoped_entities(tenant)
    sims = await entities.similarities(tenant.unscoped, vector, sorted(inside)) if inside else {}
    return sorted(sims, key=lambda e: (-sims[e], e))[:k]


def rank_relations(
    vector: Sequence[float],
    found: Sequence[RelationHit],
    vectors: Mapping[str, Sequence[float]],
    contexts: Mapping[tuple[str, str, str], Sequence[float]],
    limit: int,
) -> list[RelationHit]:
    """Score each relation by cos(question, v_s + v_o + c) (a part it lacks adds nothing; a
    relation with none is left out); the best `limit`, ties by key."""
    q = np.asarray(vector, dtype=np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    scored = []
    for h in found:
        parts = [vectors[x] for x in (h.s, h.o) if x in vectors]
        if (h.s, h.p, h.o) in contexts:
            parts.append(contexts[(h.s, h.p, h.o)])
        if not parts:
            continue
        v = np.sum(np.asarray(parts, dtype=np.float32), axis=0)
        norm = float(np.linalg.norm(v))
        score = float(v @ q) / norm if norm else 0.0
        scored.append(RelationHit(h.s, h.p, h.o, support=h.support, score=score))
    return sorted(scored, key=lambda h: (-(h.score or 0.0), h.s, h.p, h.o))[:limit]

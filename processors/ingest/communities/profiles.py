"""What a community is about, without a model (pure): its chunks, its most central entities,
its most representative chunks and a profile vector (the mean of those chunks' vectors).

A level-0 community's chunks are the chunks that mention its members (weight: how many member
mentions); a parent's are its children's. The profile stands in for a summary until a query
asks for one, and its vector is what community search (DRIFT's primer) ranks by.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from processors.ingest.communities.detect import Community
from processors.stores.documents_protocol import CommunityRecord

TOP_ENTITIES = 10
TOP_CHUNKS = 5
VECTOR_CHUNKS = 10  # chunks averaged into the profile vector


def membership_hash(members: Sequence[str]) -> str:
    """What a cached summary is valid for: the sorted members."""
    return hashlib.sha256("\0".join(sorted(members)).encode()).hexdigest()[:16]


def profile(
    communities: Sequence[Community],
    mentions: Sequence[tuple[str, str, int]],  # (entity, chunk id, count)
    edges: Sequence[tuple[str, str, float]],
    chunk_vectors: Mapping[str, Sequence[float]] | None = None,
) -> list[CommunityRecord]:
    """Records of every community (children before parents, as `detect` orders them); without
    `chunk_vectors` their vectors are left empty for `set_vectors`."""
    by_entity: dict[str, list[tuple[str, int]]] = {}
    for e, c, n in mentions:
        by_entity.setdefault(e, []).append((c, n))
    degree: dict[str, float] = {}
    owner0 = {m: c.id for c in communities if c.level == 0 for m in c.members}
    for a, b, w in edges:
        if owner0.get(a) is not None and owner0.get(a) == owner0.get(b):  # weight inside its community
            degree[a] = degree.get(a, 0.0) + w
            degree[b] = degree.get(b, 0.0) + w
    records: dict[str, CommunityRecord] = {}
    for c in communities:
        if c.children:
            chunks: dict[str, float] = {}
            for child in c.children:
                for cid, w in records[child].chunks.items():
                    chunks[cid] = chunks.get(cid, 0.0) + w
        else:
            chunks = {}
            for m in c.members:
                for cid, n in by_entity.get(m, ()):
                    chunks[cid] = chunks.get(cid, 0.0) + n
        ranked = sorted(chunks, key=lambda cid: (-chunks[cid], cid))
        records[c.id] = CommunityRecord(
            id=c.id,
            level=c.level,
            parent=c.parent,
            children=list(c.children),
            members=list(c.members),
            chunks=chunks,
            top_entities=sorted(c.members, key=lambda m: (-degree.get(m, 0.0), m))[:TOP_ENTITIES],
            top_chunks=ranked[:TOP_CHUNKS],
            membership_hash=membership_hash(c.members),
        )
    out = list(records.values())
    if chunk_vectors is not None:
        set_vectors(out, chunk_vectors)
    return out


def vector_chunks(record: CommunityRecord) -> list[str]:
    """The chunks whose vectors make the community's profile vector: its VECTOR_CHUNKS heaviest."""
    return sorted(record.chunks, key=lambda cid: (-record.chunks[cid], cid))[:VECTOR_CHUNKS]


def set_vectors(records: Sequence[CommunityRecord], chunk_vectors: Mapping[str, Sequence[float]]) -> None:
    """Give each record its profile vector: the mean of its `vector_chunks` (unit length)."""
    for r in records:
        r.vector = _mean([chunk_vectors[cid] for cid in vector_chunks(r) if cid in chunk_vectors])


def _mean(vectors: list[Sequence[float]]) -> list[float]:
    if not vectors:
        return []
    m = np.mean(np.asarray(vectors, dtype=np.float32), axis=0)
    return (m / (np.linalg.norm(m) or 1.0)).tolist()

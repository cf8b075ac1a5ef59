"""An in-memory search index over one collection's chunks: exact cosine over their vectors and
BM25 over their text, fused by reciprocal rank. A scope is a row mask applied before ranking
(an exact search of the scope, never a filter of someone else's top k)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from processors.algorithms.bm25 import Bm25Index
from processors.algorithms.fusion import reciprocal_rank_fusion
from processors.algorithms.passage_rank import Concepts, PassageRankParams, rank
from processors.algorithms.vectors import top_k
from schemas.documents import SearchMode

FUSION_DEPTH = 4  # each retriever contributes its best `FUSION_DEPTH * limit` to the fusion


@dataclass
class ChunkIndex:
    """Rows are chunks; `version` is the store's collection version it was built from."""

    version: int
    ids: list[str]
    document_ids: list[str]
    vectors: np.ndarray  # unit rows (n x d)
    bm25: Bm25Index  # over each chunk's document title and text
    concepts: Concepts
    row: dict[str, int] = field(default_factory=dict)
    mentions: list[list[str]] = field(default_factory=list)  # per row, the entities the chunk mentions

    @classmethod
    def build(
        cls,
        version: int,
        ids: list[str],
        document_ids: list[str],
        texts: Sequence[str],
        vectors: np.ndarray,
        concepts: Concepts,
        mentions: Sequence[tuple[int, str]] = (),
    ) -> ChunkIndex:
        """Index the collection's chunks (`texts`: title and text; vectors are normalised here;
        `mentions`: (row, entity) pairs)."""
        norms = np.linalg.norm(vectors, axis=1, keepdims=True) if len(vectors) else np.ones((0, 1))
        unit = (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)
        per_row: list[list[str]] = [[] for _ in ids]
        for row, entity in mentions:
            per_row[row].append(entity)
        rows = {c: i for i, c in enumerate(ids)}
        return cls(version, ids, document_ids, unit, Bm25Index(texts), concepts, rows, per_row)

    def mask(self, document_ids: set[str] | None, chunk_ids: Collection[str] | None = None) -> np.ndarray | None:
        """Rows of chunks whose document is in `document_ids` and, when given, whose id is in
        `chunk_ids` (None for both: every row)."""
        out = None
        if document_ids is not None:
            out = np.fromiter((d in document_ids for d in self.document_ids), dtype=bool, count=len(self.ids))
        if chunk_ids is not None:
            rows = np.zeros(len(self.ids), dtype=bool)
            rows[[self.row[c] for c in chunk_ids if c in self.row]] = True
            out = rows if out is None else out & rows
        return out

    def search(
        self,
        vector: Sequence[float] | None,
        text: str | None,
        mode: SearchMode,
        limit: int,
        mask: np.ndarray | None,
        params: PassageRankParams | None = None,
    ) -> list[tuple[int, float]]:
        """(row, score) of the best `limit` chunks, best first. Fused scores are RRF scores; graph
        scores are graphrank's mass (see relevance/graphrank)."""
        if mode == "graph":
            return self._graph(vector, text or "", limit, mask, params or PassageRankParams())
        rankings: list[list[int]] = []
        if mode in ("fused", "vector") and vector is not None and len(self.ids):
            q = np.asarray(vector, dtype=np.float32)
            sims = self.vectors @ (q / (np.linalg.norm(q) or 1.0))
            ranked = top_k(sims, limit if mode == "vector" else FUSION_DEPTH * limit, mask).tolist()
            if mode == "vector":
                return [(i, float(sims[i])) for i in ranked]
            rankings.append(ranked)
        if mode in ("fused", "lexical") and text and len(self.ids):
            bm = self.bm25.scores(text, mask)
            ranked = [
                i for i in top_k(bm, limit if mode == "lexical" else FUSION_DEPTH * limit, mask).tolist() if bm[i] > 0
            ]
            if mode == "lexical":
                return [(i, float(bm[i])) for i in ranked]
            rankings.append(ranked)
        fused = reciprocal_rank_fusion(rankings)
        return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

    def _graph(
        self, vector: Sequence[float] | None, text: str, limit: int, mask: np.ndarray | None, p: PassageRankParams
    ) -> list[tuple[int, float]]:
        if not len(self.ids):
            return []
        dense = _cosines(self.vectors, vector) if vector is not None else np.zeros(len(self.ids), dtype=np.float32)
        rows, scores = rank(
            self.concepts.graph, dense, self.bm25.scores(text, mask), self.concepts.named_in(text, mask), limit, p, mask
        )
        return list(zip(rows.tolist(), scores.tolist(), strict=True))

    def mentioned(self, ids: Sequence[str], document_ids: set[str] | None) -> dict[str, list[str]]:
        """The entities each chunk of `ids` mentions (chunks that mention one, and whose document
        is in `document_ids` unless None)."""
        rows = {c: r for c in ids if (r := self.row.get(c)) is not None and self.mentions[r]}
        if document_ids is not None:
            rows = {c: r for c, r in rows.items() if self.document_ids[r] in document_ids}
        return {c: list(self.mentions[r]) for c, r in rows.items()}

    def similarities(
        self, vector: Sequence[float], ids: Sequence[str], document_ids: set[str] | None
    ) -> dict[str, float]:
        """Cosine of `vector` to each chunk of `ids` that is indexed (and whose document is in
        `document_ids`, unless None)."""
        rows = {c: self.row[c] for c in ids if c in self.row}
        if document_ids is not None:
            rows = {c: r for c, r in rows.items() if self.document_ids[r] in document_ids}
        if not rows:
            return {}
        sims = _cosines(self.vectors[list(rows.values())], vector)
        return dict(zip(rows, sims.tolist(), strict=True))


def _cosines(vectors: np.ndarray, vector: Sequence[float]) -> np.ndarray:
    q = np.asarray(vector, dtype=np.float32)
    return vectors @ (q / (np.linalg.norm(q) or 1.0))


@dataclass
class RelationIndex:
    """Relation vectors of one collection and the documents each relation's sources are in."""

    version: int
    keys: list[tuple[str, str, str]]
    documents: list[frozenset[str]]
    support: list[int]  # source chunks
    vectors: np.ndarray  # unit rows

    def search(
        self, vector: Sequence[float], limit: int, allowed: set[str] | None
    ) -> list[tuple[tuple[str, str, str], float, int]]:
        """(relation, cosine, support) of the nearest relations with a source in `allowed`."""
        if not self.keys:
            return []
        mask = None
        if allowed is not None:
            mask = np.fromiter((not d.isdisjoint(allowed) for d in self.documents), dtype=bool, count=len(self.keys))
        q = np.asarray(vector, dtype=np.float32)
        sims = self.vectors @ (q / (np.linalg.norm(q) or 1.0))
        return [(self.keys[i], float(sims[i]), self.support[i]) for i in top_k(sims, limit, mask).tolist()]

"""The vectors of the vector-index section (bench/documents/vector_index.py): clustered around real
MiniLM chunk vectors, the exact answers they are measured against, and recall.

No model embeds a million chunks here in the time a run has, so a corpus is generated: the public
sets' documents (HotpotQA, MuSiQue) embedded once by the real local model are the centres; every
generated document draws a centre of its own, and each of its chunks is that centre mixed with a
second, random centre (weight 0.5-1 on its own), plus a random unit vector times `noise`,
renormalised (the recipe of bench/documents/corpus.py's distractors). The queries are the sets'
real questions, embedded as questions. Everything is cached under bench/.cache/vector-index/.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import asdict, dataclass

import numpy as np

from bench.harness.results import CACHE, DATASETS

DIM = 384
K = 10
DOCQA = DATASETS / "docqa"
CENTRE_SETS = ("hotpotqa_dev200_migres", "musique_train100_kag")
CENTRE_WORDS = 150  # a document's opening words: about one 200-token chunk
BLOCK = 50_000  # rows generated / scanned at a time: memory stays bounded at 1M


@dataclass(frozen=True)
class DataSpec:
    """Everything a generated corpus depends on (all of it goes into the cache key)."""

    size: int
    chunks_per_doc: int = 10
    noise: float = 0.5
    own_weight: tuple[float, float] = (0.5, 1.0)  # the share of a chunk's own document centre
    seed: int = 38

    def key(self) -> str:
        """The cache key of this corpus."""
        return hashlib.sha256(json.dumps(asdict(self)).encode()).hexdigest()[:12]


def unit(m: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows kept)."""
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return (m / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def generate_block(centres: np.ndarray, spec: DataSpec, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of the corpus: the same rows whatever the blocks (seeded per document)."""
    first, last = start // spec.chunks_per_doc, (stop - 1) // spec.chunks_per_doc
    rows = []
    for doc in range(first, last + 1):
        rng = np.random.default_rng((spec.seed, doc))
        lo = max(start, doc * spec.chunks_per_doc) - doc * spec.chunks_per_doc
        hi = min(stop, (doc + 1) * spec.chunks_per_doc) - doc * spec.chunks_per_doc
        own = centres[rng.integers(len(centres))]
        other = centres[rng.integers(len(centres), size=spec.chunks_per_doc)]
        w = rng.uniform(*spec.own_weight, size=(spec.chunks_per_doc, 1)).astype(np.float32)
        noise = unit(rng.standard_normal((spec.chunks_per_doc, centres.shape[1]), dtype=np.float32))
        rows.append((w * own + (1 - w) * other + spec.noise * noise)[lo:hi])
    return unit(np.concatenate(rows))


def document_of(ids: np.ndarray, spec: DataSpec) -> np.ndarray:
    """The document of each row id."""
    return ids // spec.chunks_per_doc


def corpus(spec: DataSpec, centres: np.ndarray) -> np.ndarray:
    """The corpus as a read-only memory map (generated into the cache the first time)."""
    path = CACHE / "vector-index" / f"corpus-{spec.size}-{spec.key()}.npy"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(spec.size, centres.shape[1]))
        for at in range(0, spec.size, BLOCK):
            out[at : at + BLOCK] = generate_block(centres, spec, at, min(spec.size, at + BLOCK))
        out.flush()
        del out
        tmp.rename(path)
    return np.load(path, mmap_mode="r")


def exact_top(data: np.ndarray, queries: np.ndarray, k: int = K, ids: np.ndarray | None = None) -> np.ndarray:
    """Each query's `k` nearest row ids by exact float32 cosine (unit rows), best first; over the rows
    `ids` only when given (a scope)."""
    best_ids = np.empty((len(queries), 0), dtype=np.int64)
    best = np.empty((len(queries), 0), dtype=np.float32)
    rows = np.arange(len(data)) if ids is None else np.asarray(ids)
    for at in range(0, len(rows), BLOCK):
        block = rows[at : at + BLOCK]
        sims = queries @ np.asarray(data[block] if ids is not None else data[at : at + BLOCK]).T
        best = np.concatenate([best, sims], axis=1)
        best_ids = np.concatenate([best_ids, np.broadcast_to(block, sims.shape)], axis=1)
        keep = np.argsort(-best, axis=1, kind="stable")[:, :k]
        best, best_ids = np.take_along_axis(best, keep, 1), np.take_along_axis(best_ids, keep, 1)
    return best_ids


def recall_at(found: list[np.ndarray] | np.ndarray, truth: np.ndarray, k: int = K) -> float:
    """Mean share of each query's true top `k` among the `k` ids found for it."""
    hits = [len(set(np.asarray(f)[:k].tolist()) & set(t[:k].tolist())) / k for f, t in zip(found, truth, strict=True)]
    return round(float(np.mean(hits)), 4) if hits else 0.0


def _texts(name: str, file: str, field: str) -> list[str]:
    lines = (DOCQA / name / file).read_text().splitlines()
    return [" ".join(json.loads(line)[field].split()[:CENTRE_WORDS]) for line in lines if line.strip()]


def _embedded(name: str, texts: list[str], query: bool) -> np.ndarray:
    """The texts' real MiniLM vectors (cached: the model runs once)."""
    path = CACHE / "vector-index" / f"{name}-{hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:12]}.npy"
    if path.exists():
        return np.load(path)
    from processors.models.embeddings.model import OnnxMiniLM

    async def embed() -> np.ndarray:
        model = OnnxMiniLM.shared()
        out = [await model.embed(texts[i : i + 64], query=query) for i in range(0, len(texts), 64)]
        return np.asarray([v for batch in out for v in batch], dtype=np.float32)

    vecs = unit(asyncio.run(embed()))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def real_centres() -> np.ndarray:
    """The public sets' documents (their opening words) as real MiniLM vectors."""
    texts = [t for name in CENTRE_SETS for t in _texts(name, "corpus.jsonl", "text")]
    return _embedded("centres", texts, query=False)


def real_queries(n: int) -> np.ndarray:
    """The first `n` of the public sets' questions as real MiniLM query vectors."""
    texts = [t for name in CENTRE_SETS for t in _texts(name, "questions.jsonl", "question")][:n]
    return _embedded("queries", texts, query=True)

"""The document store's write rate: chunks stored per second, store side only (vectors
and mentions given, no model), on SQLite and on Neo4j, by batch size (documents per `store`).

Synthetic documents of 4 chunks of ~60 words each, 384-dimensional vectors and 6 mentions a
chunk (half shared across the corpus, half the document's own) and a co-occurrence relation
between every two of a chunk's concepts (15 a chunk; `--no-relations`: none, as before issue 38's
relation rows were measured); each batch is one `store` call, timed alone. Neo4j writes under a
fresh user it deletes afterwards."""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from processors.algorithms.iris import RELATED_TO
from processors.stores.documents_protocol import DocumentRecord, DocumentStore, Relation
from schemas.documents import Chunk, Document, Mention
from schemas.tenant import Tenant

CHUNKS_PER_DOC, WORDS_PER_CHUNK, DIM = 4, 60, 384


@dataclass(frozen=True)
class WriteRate:
    """One backend and batch size: documents per store, chunks written, seconds, chunks/s."""

    backend: str
    batch: int
    chunks: int
    seconds: float

    @property
    def rate(self) -> float:
        """Chunks stored per second."""
        return self.chunks / self.seconds if self.seconds else 0.0


def corpus(n_docs: int, seed: int = 38, relations: bool = True) -> list[DocumentRecord]:
    """`n_docs` synthetic documents (see the module docstring)."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(5000)]
    out = []
    for d in range(n_docs):
        chunks, vecs, mentions, start = [], [], [], 0
        pairs: dict[tuple[str, str], list[str]] = {}
        for n in range(CHUNKS_PER_DOC):
            text = " ".join(rng.choice(vocab, WORDS_PER_CHUNK))
            cid = f"d{d}:{n}"
            chunks.append(Chunk(id=cid, document_id=f"d{d}", ordinal=n, text=text, start=start,
                                end=start + len(text), tokens=WORDS_PER_CHUNK))  # fmt: skip
            start += len(text) + 1
            v = rng.standard_normal(DIM).astype(np.float32)
            vecs.append((v / np.linalg.norm(v)).tolist())
            ents = [f"http://e/s{int(k)}" for k in rng.integers(0, 500, 3)] + [f"http://e/d{d}x{k}" for k in range(3)]
            mentions += [Mention(chunk_id=cid, entity=x, count=1) for x in dict.fromkeys(ents)]
            for pair in combinations(sorted(set(ents)), 2) if relations else ():
                pairs.setdefault(pair, []).append(cid)
        doc = Document(id=f"d{d}", title=f"Doc {d}", text=" ".join(c.text for c in chunks))
        rels = [Relation(a, RELATED_TO, b, ids) for (a, b), ids in pairs.items()]
        out.append(DocumentRecord(document=doc, content_hash=f"h{d}", chunks=chunks, vectors=vecs,
                                  mentions=mentions, owned={f"http://e/d{d}x0"}, relations=rels))  # fmt: skip
    return out


async def measure(
    name: str, store: DocumentStore, tenant: Tenant, batch: int, docs: int, relations: bool = True
) -> WriteRate:
    """Store `docs` documents in batches of `batch`; the time spent inside `store` only."""
    records, spent = corpus(docs, relations=relations), 0.0
    await store.store(Tenant(tenant.user, "warm-up"), corpus(1))  # connection, schema, migration
    for i in range(0, docs, batch):
        t0 = time.perf_counter()
        await store.store(tenant, records[i : i + batch])
        spent += time.perf_counter() - t0
    return WriteRate(name, batch, docs * CHUNKS_PER_DOC, spent)


async def main(argv: list[str]) -> None:
    """Print chunks/s per backend and batch size."""
    ap = argparse.ArgumentParser(prog="python -m bench write-rate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=500, help="documents per measurement")
    ap.add_argument("--batches", default="1,10,100", help="documents per store call")
    ap.add_argument("--neo4j-url", default="", help="also measure Neo4j (bolt://...)")
    ap.add_argument("--no-relations", action="store_true", help="documents without relations")
    args = ap.parse_args(argv)
    rates, rels = [], not args.no_relations
    for batch in (int(b) for b in args.batches.split(",")):
        rates.append(await _sqlite(batch, args.docs, rels))
        if args.neo4j_url:
            rates.append(await _neo4j(args.neo4j_url, batch, args.docs, rels))
    print(f"{'backend':8} {'batch':>6} {'chunks':>7} {'seconds':>8} {'chunks/s':>9}")
    for r in rates:
        print(f"{r.backend:8} {r.batch:6} {r.chunks:7} {r.seconds:8.2f} {r.rate:9.0f}")


async def _sqlite(batch: int, docs: int, relations: bool) -> WriteRate:
    from processors.stores.sqlite.documents import SqliteDocumentStore

    with tempfile.TemporaryDirectory() as home:
        store = SqliteDocumentStore(Path(home) / "docs.db")
        try:
            return await measure("sqlite", store, Tenant("bench", "c"), batch, docs, relations)
        finally:
            await store.close()


async def _neo4j(url: str, batch: int, docs: int, relations: bool) -> WriteRate:
    from processors.stores.neo4j.documents import Neo4jDocumentStore
    from processors.stores.neo4j.schema import Neo4jConnection

    store, user = Neo4jDocumentStore(Neo4jConnection(url)), f"bench-{uuid.uuid4().hex[:8]}"
    try:
        return await measure("neo4j", store, Tenant(user, "c"), batch, docs, relations)
    finally:
        for coll in ("c", "warm-up"):
            await store.delete_collection(Tenant(user, coll))
        await store.close()

"""The dense baseline over the chunk text alone: every stored chunk's text, without its
document's title, embedded by the real MiniLM in the bench process; a question's chunks ranked by
cosine. The store embeds title + text (ingest's `embedded_text`), so its vector search leans on
titles where they exist; this baseline never sees one. The vectors are cached in the variant's
home (its key covers the chunker and the model)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.docqa.collection import COLLECTION, USER
from processors.ingest.documents.params import DocumentLoadParams
from processors.ingest.documents.pipeline import chunk_document
from processors.models.embeddings.model import OnnxMiniLM, plain_tokenizer
from processors.stores.documents_protocol import DocumentStore
from schemas.documents import Chunk, Document
from schemas.tenant import Tenant

VECTORS = "text_only_vectors.npy"
IDS = "text_only_documents.json"  # the document id of each vector
READ_BATCH = 500


@dataclass
class DenseTextOnly:
    """Chunk vectors of the text alone, and each chunk's document."""

    documents: list[str]  # the document id of each row
    matrix: np.ndarray  # unit vectors, one row per chunk

    def rank(self, vector: Sequence[float], limit: int) -> list[str]:
        """The document ids of the `limit` chunks nearest `vector`, best first."""
        sims = self.matrix @ np.asarray(vector, dtype=np.float32)
        top = np.argsort(-sims, kind="stable")[:limit]
        return [self.documents[i] for i in top]


async def stored_chunks(store: DocumentStore, docs: list[Document]) -> list[Chunk]:
    """The chunks the documents flow stored for `docs` (ids as its chunker makes them, read back
    from the store so the baseline ranks exactly what the store holds)."""
    tokenizer, params = plain_tokenizer(), DocumentLoadParams()
    ids = [c.id for d in docs for c in chunk_document(d, tokenizer, params)]
    out: list[Chunk] = []
    for i in range(0, len(ids), READ_BATCH):
        out += await store.chunks(Tenant(USER, COLLECTION), ids[i : i + READ_BATCH])
    return out


async def dense_text_only(home: Path, store: DocumentStore, docs: list[Document], expected: int) -> DenseTextOnly:
    """The baseline for the collection in `home` (`expected`: the chunks indexing reported)."""
    vec_path, ids_path = home / VECTORS, home / IDS
    if vec_path.exists() and ids_path.exists():
        return DenseTextOnly(json.loads(ids_path.read_text()), np.load(vec_path))
    chunks = await stored_chunks(store, docs)
    if len(chunks) != expected:
        raise RuntimeError(f"{len(chunks)} chunks read back, indexing reported {expected}: the chunker differs")
    matrix = np.asarray(await OnnxMiniLM.shared().embed([c.text for c in chunks]), dtype=np.float32)
    found = DenseTextOnly([c.document_id for c in chunks], matrix)
    np.save(vec_path, matrix)
    ids_path.write_text(json.dumps(found.documents))
    return found

"""Fixtures and builders for the document store contract: the SQLite and Neo4j document and
community stores behind one `DocBackend` handle, records built from short texts, a seeded
random corpus of documents sharing entities, and oracles computed from the records alone.

Neo4j shares its database, so every test writes under unique user/collection names and the
handle deletes what it wrote afterwards.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from processors.algorithms.bm25 import terms
from processors.algorithms.passage_rank import PassageRankParams
from processors.ingest.communities.detect import Community
from processors.ingest.communities.profiles import profile
from processors.query.documents.search import search_chunks
from processors.stores.documents_protocol import (
    ChunkQuery,
    CommunityRecord,
    CommunityStore,
    DocumentRecord,
    DocumentStore,
    Relation,
)
from schemas.documents import Chunk, Document, Mention, Scope, SearchMode
from schemas.tenant import Tenant
from tests.integration.store_fixtures import cleaned_up, near, new_tenant, unit

DOC_BACKENDS = ("sqlite", "neo4j")
REL = "http://r/related_to"
WORDS = ["river", "mountain", "album", "albums", "study", "studies", "capital", "bridge", "museum", "music", "the"]
NAMES = ["curie", "paris", "warsaw", "seine", "louvre", "physics", "piano", "poland"]


def e(name: str) -> str:
    """The entity IRI of a name."""
    return "http://e/" + name


@dataclass
class DocBackend:
    """One backend's document and community stores, plus tenant names for a test."""

    name: str
    documents: DocumentStore
    communities: CommunityStore
    conn: Any = None  # the Neo4j connection (to check what a tenant leaves behind)
    scopes: list[tuple[str, str]] = field(default_factory=list)

    def scope(self, user: str | None = None, collection: str | None = None) -> tuple[str, str]:
        """A (user, collection) pair no other test uses (or the given names); deleted at teardown."""
        return new_tenant(self.scopes, user, collection)

    async def leftovers(self, user: str) -> int:
        """Neo4j nodes of `user` still stored (0 on SQLite, whose rows the API shows)."""
        if self.conn is None:
            return 0
        rows = await self.conn.read("MATCH (n) WHERE n.user = $user RETURN count(n) AS n", {"user": user})
        return int(rows[0]["n"])

    async def cleanup(self) -> None:
        """Delete everything written under the scopes handed out."""
        for user, collection in self.scopes:
            await self.documents.delete_collection(Tenant(user, collection))
            await self.communities.delete_collection(Tenant(user, collection))


@pytest.fixture(params=DOC_BACKENDS)
async def docs(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[DocBackend]:
    """Each document backend in turn (the contract is the same for both)."""
    if request.param == "sqlite":
        from processors.stores.sqlite.communities import SqliteCommunityStore
        from processors.stores.sqlite.documents import SqliteDocumentStore

        sqlite = SqliteDocumentStore(tmp_path / "docs.db")
        backend = DocBackend("sqlite", sqlite, SqliteCommunityStore(sqlite.db, sqlite.lists))
    else:
        from processors.stores.neo4j.documents import Neo4jCommunityStore, Neo4jDocumentStore
        from processors.stores.neo4j.schema import Neo4jConnection

        conn = Neo4jConnection(request.getfixturevalue("servers").neo4j_url)
        backend = DocBackend("neo4j", Neo4jDocumentStore(conn), Neo4jCommunityStore(conn), conn)
    async with cleaned_up(backend, backend.communities, backend.documents):
        yield backend


def record(
    doc_id: str,
    texts: Sequence[str],
    vectors: Sequence[list[float]] | None = None,
    mentions: Sequence[tuple[int, str, int]] = (),
    relations: Sequence[tuple[Any, ...]] = (),
    owned: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> DocumentRecord:
    """A document of chunks `texts` (ids `<doc>:<n>`); mentions (chunk n, entity, count) and
    related-to relations (s, o, chunk ns) by entity name."""
    chunks, start = [], 0
    for n, text in enumerate(texts):
        chunks.append(Chunk(id=f"{doc_id}:{n}", document_id=doc_id, ordinal=n, text=text, start=start,
                            end=start + len(text), tokens=len(text.split())))  # fmt: skip
        start += len(text) + 1
    doc = Document(id=doc_id, title=doc_id.upper(), text=" ".join(texts), metadata=metadata or {})
    digest = hashlib.sha256(json.dumps([list(texts), metadata], sort_keys=True).encode()).hexdigest()[:16]
    return DocumentRecord(
        document=doc,
        content_hash=digest,
        chunks=chunks,
        vectors=list(vectors) if vectors is not None else [unit(1000 + n) for n in range(len(texts))],
        mentions=[Mention(chunk_id=f"{doc_id}:{n}", entity=e(x), count=c) for n, x, c in mentions],
        relations=[Relation(e(s), REL, e(o), [f"{doc_id}:{n}" for n in ns]) for s, o, ns in relations],
        owned={e(x) for x in owned},
    )


def random_corpus(rng: np.random.Generator, n_docs: int) -> list[DocumentRecord]:
    """Documents of 1-3 chunks of random words and entity names (mentions: the names a chunk
    holds; relations: pairs of names in one chunk), vectors near one of three topics."""
    topics = [unit(7000 + t) for t in range(3)]
    out = []
    for d in range(n_docs):
        texts, vecs, mentions, relations = [], [], [], []
        for n in range(int(rng.integers(1, 4))):
            words = [str(w) for w in rng.choice(WORDS + NAMES, size=int(rng.integers(3, 9)))]
            texts.append(" ".join(words))
            vecs.append(near(topics[int(rng.integers(0, 3))], int(rng.integers(0, 10**6)), 0.8))
            names = sorted({w for w in words if w in NAMES})
            mentions += [(n, x, words.count(x)) for x in names]
            relations += [(a, b, [n]) for i, a in enumerate(names) for b in names[i + 1 :]]
        meta = {"group": f"g{d % 3}", "year": int(rng.integers(2000, 2003)), "tags": ["t" + str(d % 2), "all"]}
        owned = [x for _, x, _ in mentions if NAMES.index(x) % 2 == d % 2]
        out.append(record(f"d{d}", texts, vecs, mentions, relations, owned, meta))
    return out


def random_scope(rng: np.random.Generator, records: Sequence[DocumentRecord]) -> Scope:
    """Document ids, metadata filters, or both (sometimes naming documents that do not exist)."""
    ids = [r.document.id for r in records] + ["nope"]
    kind = int(rng.integers(0, 4))
    picked = [str(i) for i in rng.choice(ids, size=int(rng.integers(0, len(ids))), replace=False)]
    meta: dict[str, Any] = {"group": [f"g{int(g)}" for g in rng.choice(3, size=2, replace=False)]}
    meta |= {"year": int(rng.integers(2000, 2003))} if rng.random() < 0.5 else {"tags": "t1"}
    if kind == 0:
        return Scope(document_ids=picked)
    if kind == 1:
        return Scope(metadata=meta)
    return Scope(document_ids=picked, metadata=meta if kind == 2 else {"group": "g1"})


def in_scope(r: DocumentRecord, scope: Scope | None) -> bool:
    """The scope's meaning: listed ids, and every metadata key equal to one of its values."""
    if scope is None:
        return True
    if scope.document_ids is not None and r.document.id not in scope.document_ids:
        return False
    for key, want in (scope.metadata or {}).items():
        have = r.document.metadata.get(key, [])
        have_json = {json.dumps(x) for x in (have if isinstance(have, list) else [have])}
        if not have_json & {json.dumps(x) for x in (want if isinstance(want, list) else [want])}:
            return False
    return True


def reference_cosines(
    records: Sequence[DocumentRecord], vector: Sequence[float], allowed: set[str] | None = None
) -> dict[str, float]:
    """Chunk id -> exact cosine of its vector to `vector`, for the chunks of `allowed` documents."""
    q = np.asarray(vector, dtype=np.float64)
    q = q / (np.linalg.norm(q) or 1.0)
    out = {}
    for r in records:
        if allowed is None or r.document.id in allowed:
            for c, v in zip(r.chunks, r.vectors, strict=True):
                m = np.asarray(v, dtype=np.float64)
                out[c.id] = float(m @ q / (np.linalg.norm(m) or 1.0))
    return out


def term_holders(records: Sequence[DocumentRecord], text: str, allowed: set[str] | None = None) -> set[str]:
    """The chunks (of `allowed` documents) whose BM25 terms (title and text) hold a term of `text`."""
    wanted = set(terms(text))
    return {
        c.id
        for r in records
        if allowed is None or r.document.id in allowed
        for c in r.chunks
        if wanted & set(terms(f"{r.document.title}\n{c.text}"))
    }


def reference_relations_of(
    records: Sequence[DocumentRecord], entities: Sequence[str], per_entity: int, allowed: set[str] | None
) -> dict[tuple[str, str, str], int]:
    """Relation -> in-scope support, of each entity's `per_entity` most supported relations with a
    source in `allowed`, as subject (ties by predicate, object) and as object (predicate, subject)."""
    held = support([r for r in records if allowed is None or r.document.id in allowed])
    out: dict[tuple[str, str, str], int] = {}
    for x in entities:
        for end in (0, 2):
            mine = sorted((k for k in held if k[end] == x), key=lambda k: (-held[k], k[1], k[2 - end]))
            out.update({k: held[k] for k in mine[:per_entity]})
    return out


def sources(records: Sequence[DocumentRecord]) -> dict[tuple[str, str, str], set[str]]:
    """Relation -> the chunks it came from."""
    out: dict[tuple[str, str, str], set[str]] = {}
    for r in records:
        for x in r.relations:
            out.setdefault((x.s, x.p, x.o), set()).update(x.chunk_ids)
    return out


def support(records: Sequence[DocumentRecord]) -> dict[tuple[str, str, str], int]:
    """Relation -> how many chunks support it."""
    return {k: len(v) for k, v in sources(records).items()}


def communities_of(records: Sequence[DocumentRecord]) -> list[CommunityRecord]:
    """Two level-0 communities (the first and second half of NAMES) under one level-1 parent,
    profiled by the real profile code."""
    low, high = [e(x) for x in NAMES[:4]], [e(x) for x in NAMES[4:]]
    leaves = [Community("k-low", 0, low, "k-top"), Community("k-high", 0, high, "k-top")]
    top = Community("k-top", 1, low + high, None, ["k-low", "k-high"])
    mentions = [(m.entity, m.chunk_id, m.count) for r in records for m in r.mentions]
    edges = [(s, o, float(w)) for (s, _, o), w in support(records).items()]
    vectors = {c.id: v for r in records for c, v in zip(r.chunks, r.vectors, strict=True)}
    return profile([*leaves, top], mentions, edges, vectors)


async def search(
    docs: DocBackend, tenant: Tenant, vector: list[float] | None, text: str | None, mode: SearchMode, limit: int
) -> list[Chunk]:
    """The documents service's chunk search over this backend's store (in the tenant's scope)."""
    return await search_chunks(docs.documents, ChunkQuery(tenant, vector), text, mode, limit, PassageRankParams())


def mentions_of(records: Sequence[DocumentRecord]) -> set[tuple[str, str, int]]:
    """(entity, chunk, count) of every mention, counts summed."""
    out: dict[tuple[str, str], int] = {}
    for r in records:
        for m in r.mentions:
            out[m.entity, m.chunk_id] = out.get((m.entity, m.chunk_id), 0) + m.count
    return {(en, c, n) for (en, c), n in out.items()}

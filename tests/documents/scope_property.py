"""The scope property every retrieval service keeps, as one scenario run on each backend
(tests/documents/test_scope_property.py on SQLite, tests/integration/test_scope_property_servers.py
on Neo4j and Cassandra): for random scopes over documents that share entities, nothing comes
from outside the scope, and the scoped answer retrieves what the same question retrieves from
a fresh collection holding only the scope's documents."""

from __future__ import annotations

from typing import Any

import numpy as np

from processors.base.client import RequestResponseClient
from processors.commands.system import System
from schemas.documents import Document, LoadDocuments, Scope
from schemas.drift import DriftRequest
from schemas.graph_rag import GraphRagRequest
from schemas.kg_query import KgQueryRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.services import DOCUMENT_LOAD, DRIFT, GRAPH_RAG, KG_QUERY, LAZY_RAG, TRIPLES
from schemas.terms import RDFS_LABEL, Term
from schemas.triples import PatternQuery

C = "shared"
ROWS = [  # id, title, text, topic
    ("curie", "Marie Curie", "Marie Curie was a physicist in Paris. She married Pierre Curie.", "science"),
    ("pierre", "Pierre Curie", "Pierre Curie was born in Paris and worked with Marie Curie.", "science"),
    ("paris", "Paris", "Paris is the capital of France. The Seine flows through Paris.", "places"),
    ("warsaw", "Warsaw", "Warsaw is the capital of Poland. Marie Curie was born in Warsaw.", "places"),
    ("seine", "Seine", "The Seine is a river in France that flows through Paris to the sea.", "places"),
    ("sorbonne", "Sorbonne", "The Sorbonne is a university in Paris where Marie Curie taught.", "science"),
    ("chopin", "Frederic Chopin", "Frederic Chopin was a composer born near Warsaw in Poland.", "music"),
    ("poland", "Poland", "Poland is a country whose capital is Warsaw. Chopin is from Poland.", "places"),
]
CORPUS = [Document(id=i, title=title, text=text, metadata={"topic": topic}) for i, title, text, topic in ROWS]
QUESTIONS = ["Where was Marie Curie born?", "Which river flows through Paris?", "Who was born near Warsaw?"]
KG_MODES = ("local", "global", "hybrid", "mix", "naive")


def client(system: System, service: Any) -> RequestResponseClient[Any]:
    """A client of one service of the default flow."""
    return RequestResponseClient.for_service(system.bus, service, "default", 300)


async def load(system: System, user: str, collection: str, docs: list[Document]) -> None:
    """Load documents through the documents flow (every one must load)."""
    last = await client(system, DOCUMENT_LOAD).request(LoadDocuments(user=user, collection=collection, documents=docs))
    assert last.loaded + last.unchanged == len(docs) and not last.failed, last


def scopes(rng: np.random.Generator) -> list[Scope]:
    """Random document scopes (2 to 5 documents) and a metadata scope."""
    ids = [d.id for d in CORPUS]
    picked = [Scope(document_ids=sorted(rng.choice(ids, int(rng.integers(2, 6)), replace=False).tolist()))
              for _ in range(3)]  # fmt: skip
    return [*picked, Scope(metadata={"topic": "places"})]


def scopes_count() -> int:
    """How many scopes `scopes` makes (the fresh collections a run leaves: `fresh-0`...)."""
    return len(scopes(np.random.default_rng(0)))


def inside(scope: Scope) -> list[Document]:
    """The corpus documents a scope holds."""
    if scope.document_ids:
        return [d for d in CORPUS if d.id in scope.document_ids]
    return [d for d in CORPUS if all(d.metadata.get(k) == v for k, v in (scope.metadata or {}).items())]


async def entities_of(system: System, user: str, collection: str) -> set[str]:
    """Every labelled entity of a collection (the concepts its documents made)."""
    q = PatternQuery(user=user, collection=collection, p=Term.iri(RDFS_LABEL), limit=100_000)
    return {t.s.value for t in (await client(system, TRIPLES).request(q)).triples}


def _retrieved(documents: Any, chunks: Any, entities: Any, relations: Any) -> dict[str, set[Any]]:
    """A retrieval's parts as sets of ids (order is a ranking's business, membership the scope's)."""
    return {
        "documents": {d.id for d in documents},
        "chunks": {(c.id, c.document_id) for c in chunks},
        "entities": {e.id for e in entities},
        "relations": {(r.s, r.p, r.o) for r in relations},
    }


async def answers(system: System, user: str, collection: str, question: str, scope: Scope | None) -> dict[str, Any]:
    """What each service retrieves for `question` (no model): ids, as sets."""
    base = {"user": user, "collection": collection, "query": question, "scope": scope}
    out: dict[str, Any] = {}
    lazy = await client(system, LAZY_RAG).request(LazyRagRequest(**base, operation="expand"))
    out["lazy-rag"] = _retrieved(lazy.documents, lazy.chunks, lazy.entities, lazy.relationships)
    for mode in KG_MODES:
        kg = await client(system, KG_QUERY).request(KgQueryRequest(**base, mode=mode, no_llm=True))
        out[f"kg-query {mode}"] = _retrieved(kg.references, kg.chunks, kg.entities, kg.relationships)
    rag = await client(system, GRAPH_RAG).request(GraphRagRequest(**base, no_llm=True))
    out["graph-rag"] = {"entities": {x for t in rag.triples for x in (t.s_id, t.o_id) if x},
                        "relations": {(t.s_id, t.p_id, t.o_id) for t in rag.triples}}  # fmt: skip
    return out


async def drift_documents(system: System, user: str, question: str, scope: Scope) -> set[str]:
    """The documents of everything DRIFT's answer (no model) rests on, within `scope`."""
    req = DriftRequest(user=user, collection=C, query=question, scope=scope, no_llm=True, streaming=False)
    res = await client(system, DRIFT).request(req)
    return {d.id for d in res.documents} | {c.document_id for c in res.chunks} | {c.document_id for c in res.citations}


async def check_scopes(system: System, user: str, seed: int = 7) -> int:
    """Run the property over random scopes; returns how many (scope, question) cases were checked."""
    await load(system, user, C, CORPUS)
    cases = 0
    for n, scope in enumerate(scopes(np.random.default_rng(seed))):
        docs = inside(scope)
        held = {d.id for d in docs}
        fresh = f"fresh-{n}"
        await load(system, user, fresh, docs)
        allowed = await entities_of(system, user, fresh)
        for question in QUESTIONS:
            scoped = await answers(system, user, C, question, scope)
            alone = await answers(system, user, fresh, question, None)
            for service, got in scoped.items():
                where = (service, question, scope)
                assert got.get("documents", set()) <= held, where
                assert {d for _, d in got.get("chunks", set())} <= held, where
                assert got["entities"] <= allowed, where
                assert {x for r in got["relations"] for x in (r[0], r[2])} <= allowed | {""}, where
                assert got == alone[service], (where, got, alone[service])
            assert await drift_documents(system, user, question, scope) <= held, ("drift", question, scope)
            cases += 1
    return cases

"""What a documents collection holds on Neo4j, read straight from the database (not through
kgflow's stores), so two loads can be compared row for row and duplicates seen: every list
keeps repeats, the comparison is of multisets.

A concept's label (and its entity-index label) is compared by its normalised words: its spelling
(case, punctuation) is that of the first document that named it, which depends on the order
documents were written in; and a writer killed between writing a new concept's index label and
its label triple, while another created the same concept, can leave the two spelt differently."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from processors.algorithms.text_match import normalize
from schemas.terms import RDFS_LABEL

_T = "{user: $user, collection: $collection}"
QUERIES = {
    "documents": f"MATCH (d:KgDocument {_T}) RETURN d.id AS id, d.content_hash AS hash, d.chunks AS chunks",
    "chunks": f"MATCH (d:KgDocument {_T})-[:HAS_CHUNK]->(c:KgChunk) "
    "RETURN c.id AS id, d.id AS doc, c.ordinal AS ordinal, c.text AS text, c.embedding AS vec",
    "mentions": f"MATCH (c:KgChunk {_T})-[m:HAS_ENTITY]->(e:KgEntity) RETURN c.id AS chunk, e.uri AS entity, "
    "m.count AS n",
    # a source number naming no chunk of the tenant reads as '?' (a sound collection has none)
    "relations": f"MATCH (s:KgEntity {_T})-[r:KG_REL]->(o:KgEntity) RETURN s.uri AS s, r.p AS p, o.uri AS o, "
    "r.embedding IS NOT NULL AS vec, [n IN r.src | coalesce(head(COLLECT { MATCH (c:KgChunk {n: n}) "
    "WHERE c.user = $user AND c.collection = $collection RETURN c.id }), '?')] AS chunks",
    "triples": f"MATCH (s:KgEntity {_T})-[r:KG_EDGE]->(o) RETURN s.uri AS s, r.p AS p, coalesce(o.uri, o.value) AS o",
    "entities": f"MATCH (e:KgEntity {_T}) RETURN e.uri AS uri, e.label AS label, e.index_label AS index_label, "
    "e.embedding AS vec, e.concept AS concept",
    "predicates": f"MATCH (p:KgPredicate {_T}) RETURN p.uri AS uri, p.label AS label",
    "communities": f"MATCH (c:KgCommunity {_T}) OPTIONAL MATCH (e:KgEntity)-[:IN_COMMUNITY]->(c) "
    "RETURN c.id AS id, c.level AS level, c.parent AS parent, c.stale AS stale, c.chunks AS chunks, "
    "collect(e.uri) AS members",
    "community_chunks": f"MATCH (ch:KgChunk {_T})-[w:IN_COMMUNITY]->(c:KgCommunity) "
    "RETURN c.id AS community, ch.id AS chunk, w.weight AS weight",
}


@dataclass
class Collection:
    """A collection's rows, as comparable multisets, and its vectors by id."""

    rows: dict[str, Counter[Any]] = field(default_factory=dict)
    chunk_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    entity_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    spelling: dict[str, str] = field(default_factory=dict)  # entity -> its label as written

    def duplicates(self) -> dict[str, list[Any]]:
        """Rows stored more than once, per kind (none in a sound collection)."""
        return {k: [r for r, n in c.items() if n > 1] for k, c in self.rows.items() if any(n > 1 for n in c.values())}

    def counts(self) -> dict[str, int]:
        """Rows of each kind."""
        return {k: sum(c.values()) for k, c in self.rows.items()}

    def labels(self) -> Counter[str]:
        """rdfs:label triples per entity (one each in a sound collection)."""
        return Counter(s for (s, p, _), n in self.rows["triples"].items() if p == RDFS_LABEL for _ in range(n))


def read_collection(neo4j_url: str, user: str, collection: str) -> Collection:
    """Every row of the collection (see the module docstring)."""
    from neo4j import GraphDatabase

    out = Collection()
    with GraphDatabase.driver(neo4j_url, auth=None) as driver, driver.session() as session:
        got = {k: [dict(r) for r in session.run(q, user=user, collection=collection)] for k, q in QUERIES.items()}
    out.rows["documents"] = Counter((r["id"], r["hash"], r["chunks"]) for r in got["documents"])
    out.rows["chunks"] = Counter((r["id"], r["doc"], r["ordinal"], r["text"]) for r in got["chunks"])
    out.chunk_vectors = {r["id"]: np.asarray(r["vec"] or [], dtype=np.float32) for r in got["chunks"]}
    out.rows["mentions"] = Counter((r["chunk"], r["entity"], r["n"]) for r in got["mentions"])
    out.rows["relations"] = Counter(
        (r["s"], r["p"], r["o"], r["vec"], tuple(sorted(r["chunks"]))) for r in got["relations"]
    )
    out.rows["triples"] = Counter(
        (r["s"], r["p"], normalize(r["o"]) if r["p"] == RDFS_LABEL else r["o"]) for r in got["triples"]
    )
    out.rows["entities"] = Counter(
        (r["uri"], _words(r["label"]), _words(r["index_label"]), r["vec"] is not None, r["concept"])
        for r in got["entities"]
    )
    out.spelling = {r["uri"]: r["label"] for r in got["entities"] if r["label"] is not None}
    out.entity_vectors = {r["uri"]: np.asarray(r["vec"], dtype=np.float32) for r in got["entities"] if r["vec"]}
    out.rows["predicates"] = Counter((r["uri"], r["label"]) for r in got["predicates"])
    out.rows["communities"] = Counter(
        (r["id"], r["level"], r["parent"], r["stale"], r["chunks"], tuple(sorted(r["members"])))
        for r in got["communities"]
    )
    out.rows["community_chunks"] = Counter(
        (r["community"], r["chunk"], round(r["weight"], 6)) for r in got["community_chunks"]
    )
    return out


def _words(label: str | None) -> str | None:
    return None if label is None else normalize(label)


def vector_gap(a: dict[str, np.ndarray], b: dict[str, np.ndarray], ids: set[str] | None = None) -> float:
    """The largest difference between the vectors both hold by the same id, of `ids` if given
    (inf if the ids differ)."""
    if a.keys() != b.keys():
        return float("inf")
    keys = a.keys() if ids is None else a.keys() & ids
    return max((float(np.max(np.abs(a[k] - b[k]))) if a[k].size else 0.0 for k in keys), default=0.0)


def delete_users(neo4j_url: str, users: list[str]) -> None:
    """Remove every node of these (test) users."""
    from neo4j import GraphDatabase

    with GraphDatabase.driver(neo4j_url, auth=None) as driver, driver.session() as session:
        session.run(
            "MATCH (n) WHERE n.user IN $users CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS", users=users
        ).consume()

"""The Neo4j document store's relation model migration (doc_migration version 6) on the real Neo4j:
a database an earlier kgflow wrote, a `KgRelation` node per relation with a `SOURCE_OF` link from
each source chunk (and, older still, a stored vector and a key spelt out), becomes one `KG_REL`
edge per relation. The old data is written by Cypher here (one collection's new-model data turned
back into the old model); read back through the store, it gives what the same records written
by this version give, and its documents' later replacement and deletion take their relations back."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from processors.stores.neo4j import relations as neo4j_relations
from processors.stores.neo4j.doc_migration import migrate_documents
from processors.stores.neo4j.relation_migration import DONE
from schemas.documents import Scope
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import NAMES, REL, DocBackend, e, random_corpus, record

_T = "{user: $user, collection: $collection}"
# What a version before 6 stored: relation nodes keyed by their triple spelt out (before version 5)
# with a vector (before version 4), a SOURCE_OF link from each source; no KG_REL, REL_END or number.
TO_OLD_MODEL = (
    f"MATCH (s:KgEntity {_T})-[r:KG_REL]->(o:KgEntity) CREATE (x:KgRelation {{user: $user, "
    "collection: $collection, key: '[\"' + $user + '\", \"' + s.uri + '\", \"' + r.p + '\", \"' + o.uri + '\"]', "
    "s: s.uri, p: r.p, o: o.uri, embedding: [1.0, 0.0]}) WITH r, x UNWIND r.src AS n "
    f"MATCH (c:KgChunk {_T}) WHERE c.n = n CREATE (c)-[:SOURCE_OF]->(x)",
    f"MATCH (:KgEntity {_T})-[r:KG_REL]->() DELETE r",
    f"MATCH (:KgChunk {_T})-[x:REL_END]->() DELETE x",
    f"MATCH (c:KgChunk {_T}) REMOVE c.n",
    f"MATCH (e:KgEntity {_T}) WHERE e.concept IS NULL AND e.label IS NULL AND NOT (e)--() DELETE e",
    "MERGE (m:KgSchema {key: 'documents'}) SET m.version = 3",
)
COUNT_OLD = (
    f"RETURN COUNT {{ MATCH (:KgRelation {_T}) }} AS rels, COUNT {{ MATCH (:KgChunk {_T})-[:SOURCE_OF]->() }} AS links"
)
COUNT_NEW = f"MATCH (:KgEntity {_T})-[r:KG_REL]->() RETURN count(r) AS rels, sum(size(r.src)) AS sources"


def corpus() -> list:
    """The seeded corpus and a document with a typed relation whose object its chunk does not mention."""
    typed = record("typed", ["curie studied in paris"], mentions=[(0, "curie", 1)],
                   relations=[("curie", "sorbonne", [0]), ("curie", "paris", [0])])  # fmt: skip
    return [*random_corpus(np.random.default_rng(38), 24), typed]


async def reads(docs: DocBackend, tenant: Tenant) -> dict[str, object]:
    """What relation search and the community build read of the collection, in and out of scopes."""
    assert docs.conn is not None
    ents = [e(x) for x in [*NAMES, "sorbonne"]]
    out: dict[str, object] = {}
    for name, scope in (("all", None), ("ids", Scope(document_ids=["d1", "d2", "d5", "typed"])),
                        ("meta", Scope(metadata={"group": "g1"}))):  # fmt: skip
        t = tenant.scoped(scope)
        among = await docs.documents.relations(t, ents, 200)
        out[f"{name}:among"] = [(r.s, r.p, r.o, r.support) for r in among]
        out[f"{name}:of"] = sorted((r.s, r.p, r.o, r.support) for r in await docs.documents.relations_of(t, ents, 4))
        triples = [(r.s, r.p, r.o) for r in among]
        chunks = await neo4j_relations.relation_chunks(docs.conn, t, triples, 2)
        out[f"{name}:chunks"] = sorted((c.relation, c.chunk_id) for c in chunks)
        if scope is not None:
            out[f"{name}:neighbours"] = await docs.documents.scoped_neighbours(t, ents, 3)
    graph = await docs.communities.graph(tenant)
    out["graph"] = sorted(graph.edge_rows())
    return out


@pytest.mark.parametrize("docs", ["neo4j"], indirect=True)
async def test_an_older_database_gets_each_relation_as_one_edge_and_reads_the_same(
    docs: DocBackend, caplog: pytest.LogCaptureFixture
) -> None:
    assert docs.conn is not None
    new, old = Tenant(*docs.scope()), Tenant(*docs.scope())
    for tenant in (new, old):
        await docs.documents.store(tenant, corpus())
    expected = await reads(docs, new)
    assert expected["all:among"] and expected["ids:neighbours"]  # the comparison compares something
    params = {"user": old.user, "collection": old.collection}
    before = (await docs.conn.read(COUNT_NEW, params))[0]
    for cypher in TO_OLD_MODEL:
        await docs.conn.write([(cypher, params)])
    assert (await docs.conn.read(COUNT_OLD, params))[0] == {"rels": before["rels"], "links": before["sources"]}
    assert not await docs.conn.read(DONE, {})

    with caplog.at_level(logging.WARNING, logger="processors.stores.neo4j.relation_migration"):
        await migrate_documents(docs.conn)
    assert await docs.conn.read(DONE, {})
    # an operator sees the migration start and how far it got (a large database takes hours)
    said = [r.getMessage() for r in caplog.records if r.name.endswith("relation_migration")]
    assert "answers once it ends" in said[0] and "relations converted" in said[-1]
    assert (await docs.conn.read(COUNT_OLD, params))[0] == {"rels": 0, "links": 0}
    assert (await docs.conn.read(COUNT_NEW, params))[0] == before
    assert await reads(docs, old) == expected
    await migrate_documents(docs.conn)  # marked done: nothing changes
    assert (await docs.conn.read(COUNT_NEW, params))[0] == before

    # the migrated chunks' relations are found and taken back: the typed one through REL_END
    replaced = record("typed", ["curie alone"], mentions=[(0, "curie", 1)])
    removed = {}
    for tenant in (new, old):
        rewritten = await docs.documents.store(tenant, [replaced])
        assert (e("curie"), REL, e("sorbonne")) in rewritten.relations
        deleted = await docs.documents.delete_documents(tenant, ["d1", "d2"])
        removed[tenant] = (rewritten.relations, deleted.relations)
    assert removed[old] == removed[new]
    after = await reads(docs, old)
    assert after == await reads(docs, new) and after != expected

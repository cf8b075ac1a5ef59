"""One contract for every store backend: SQLite + local index, Cassandra, Neo4j.

Each test runs on all three (the `store` fixture is parametrized) and compares the backend's
answer with an oracle computed here from the same inputs, so no backend can drift. Neighbour
queries have their own file, test_store_neighbours.py.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from tests.integration.store_fixtures import GRAPH, XSD_INT, StoreBackend, iri, near, nq, t, unit

pytestmark = pytest.mark.usefixtures("servers")


def matches(tr: Triple, s: Term | None, p: Term | None, o: Term | None) -> bool:
    """The pattern semantics every backend implements."""
    return (s is None or tr.s.value == s.value) and (p is None or tr.p.value == p.value) and (o is None or tr.o == o)


PATTERNS = [
    (None, None, None),
    (iri("a"), None, None),
    (None, iri("p1"), None),
    (None, None, iri("c")),
    (iri("a"), iri("p1"), None),
    (iri("a"), None, iri("c")),
    (None, iri("p2"), iri("c")),
    (iri("a"), iri("p1"), iri("b")),
    (None, None, iri("b")),
    (None, None, Term.literal("b")),
    (None, None, Term.literal("42", XSD_INT)),
    (None, None, Term.literal("42")),
    (None, None, Term.literal("Alpha", language="en")),
    (None, None, Term.literal("Alpha")),
    (iri("a"), iri("name"), Term.literal("Alpha", language="en")),
    (None, iri(RDFS_LABEL), None),
]


async def test_add_and_pattern_queries(store: StoreBackend) -> None:
    user, coll = store.scope()
    assert await store.triples.add_triples(Tenant(user, coll), GRAPH) > 0
    await store.triples.add_triples(Tenant(user, coll), GRAPH[:4])  # duplicates are ignored
    for s, p, o in PATTERNS:
        got = await store.triples.pattern(Tenant(user, coll), s, p, o, 100)
        want = [x for x in GRAPH if matches(x, s, p, o)]
        assert sorted(got, key=repr) == sorted(want, key=repr), (s, p, o)
    some = await store.triples.pattern(Tenant(user, coll), None, None, None, 3)
    assert len(some) == 3 and set(some) <= set(GRAPH)
    assert len(await store.triples.pattern(Tenant(user, coll), iri("a"), None, None, 2)) == 2


async def test_nearest_predicates(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.index.upsert(
        Tenant(user, coll),
        [(f"r{i}", f"relation {i}", unit(300 + i)) for i in range(12)],
        "predicate",
        model="unit-test",
    )
    await store.index.upsert(
        Tenant(user, coll), [("e", "an entity", unit(301))], model="unit-test"
    )  # entities are never predicate hits
    query = near(unit(305), 77, 0.5)
    sims = {f"r{i}": float(np.dot(unit(300 + i), query)) for i in range(12)}
    want = sorted(sims, key=lambda k: -sims[k])[:3]
    hits = await store.index.nearest_predicates(Tenant(user, coll), query, 3)
    assert [h.iri for h in hits] == want and want[0] == "r5"
    assert [h.score for h in hits] == pytest.approx([sims[k] for k in want], abs=store.cosine_tol)
    assert hits[0].label == "relation 5"
    assert await store.index.nearest_predicates(Tenant(*store.scope()), query, 3) == []  # another tenant has none


async def test_labels_batched(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
    assert await store.triples.labels(Tenant(user, coll), ["a", "b", "c", "nope"]) == {"a": "Alpha", "b": "Bee"}
    await store.triples.add_triples(Tenant(user, coll), [t("c", RDFS_LABEL, Term.literal("Sea"))])
    assert await store.triples.labels(Tenant(user, coll), ["c", "a", "c"]) == {"a": "Alpha", "c": "Sea"}


async def test_replace_labels_leaves_one_label(store: StoreBackend) -> None:
    """`replace_labels`: an IRI's label triple (the batch's last) replaces the label it has, so it
    keeps one; other triples are stored as ever. On SQLite and Neo4j the replacement is inside the
    write, so concurrent writers leave one label triple, the one `labels` reads (Cassandra reads
    first: not asserted)."""
    user, coll = store.scope()
    label = iri(RDFS_LABEL)
    tenant = Tenant(user, coll)
    await store.triples.add_triples(
        tenant, [t("a", RDFS_LABEL, Term.literal("Ada")), t("b", RDFS_LABEL, Term.literal("Bo"))]
    )
    batch = [t("a", RDFS_LABEL, Term.literal("ada")), t("b", RDFS_LABEL, Term.literal("BOB")),
             t("b", RDFS_LABEL, Term.literal("Bob")), t("a", "knows", "b")]  # fmt: skip
    await store.triples.add_triples(tenant, batch, replace_labels=True)
    stored = await store.triples.pattern(tenant, None, label, None, 100)
    assert sorted((x.s.value, x.o.value) for x in stored) == [("a", "ada"), ("b", "Bob")]
    assert await store.triples.labels(tenant, ["a", "b"]) == {"a": "ada", "b": "Bob"}
    assert await store.triples.pattern(tenant, iri("a"), iri("knows"), None, 10)
    await store.triples.add_triples(tenant, [t("a", RDFS_LABEL, Term.literal("ada"))], replace_labels=True)
    assert [x.o.value for x in await store.triples.pattern(tenant, iri("a"), label, None, 10)] == ["ada"]
    if store.name == "cassandra":
        return
    await store.triples.add_triples(tenant, [t(f"c{n}", "knows", "a") for n in range(5)])  # nodes that exist
    for n in range(5):
        forms = [f"Concept {n}", f"CONCEPT {n}", f"concept {n}"]
        writes = [store.triples.add_triples(tenant, [t(f"c{n}", RDFS_LABEL, Term.literal(f))], replace_labels=True)
                  for f in forms]  # fmt: skip
        await asyncio.gather(*writes)
        labels = [x.o.value for x in await store.triples.pattern(tenant, iri(f"c{n}"), label, None, 10)]
        assert len(labels) == 1 and labels[0] in forms
        assert await store.triples.labels(tenant, [f"c{n}"]) == {f"c{n}": labels[0]}


async def test_entity_vector_search_top_k(store: StoreBackend) -> None:
    user, coll = store.scope()
    items = [(f"e{i}", f"entity {i}", unit(i)) for i in range(20)]
    await store.index.upsert(Tenant(user, coll), items, model="unit-test")
    query = near(unit(7), 99, 0.6)
    await store.index.upsert(
        Tenant(user, coll), [("pred", "a predicate", query)], kind="predicate", model="unit-test"
    )  # never a hit
    m = np.asarray([v for _, _, v in items], dtype=np.float32)
    sims = m @ np.asarray(query, dtype=np.float32)
    order = np.argsort(-sims)[:5]
    hits = await store.index.search(Tenant(user, coll), query, None, 5)
    got = [float(sims[int(h.iri[1:])]) for h in hits]  # the best 5 in order (a tie within int8's error either way)
    assert got == pytest.approx([float(sims[i]) for i in order], abs=store.cosine_tol)
    assert [h.score for h in hits] == pytest.approx(got, abs=store.cosine_tol)
    assert not any(h.lexical for h in hits) and hits[0].iri == "e7" and hits[0].label == "entity 7"
    got = await store.index.vectors(Tenant(user, coll), ["e3", "pred", "unknown"])
    assert set(got) == {"e3", "pred"} and np.allclose(got["e3"], unit(3), atol=store.cosine_tol)


async def test_lexical_exact_phrase_match(store: StoreBackend) -> None:
    user, coll = store.scope()
    labels = {"nyc": "New York City", "ny": "New York", "yk": "York", "pa": "Paris", "coy": "City of York", "th": "The"}
    await store.index.upsert(
        Tenant(user, coll), [(k, v, unit(n)) for n, (k, v) in enumerate(labels.items())], model="unit-test"
    )
    question = "Which river flows through New York City? The big one"
    hits = await store.index.search(Tenant(user, coll), None, question, 10)
    assert [(h.iri, h.lexical) for h in hits] == [("nyc", True), ("ny", True), ("yk", True)]
    assert [h.label for h in hits] == ["New York City", "New York", "York"]
    mixed = await store.index.search(Tenant(user, coll), unit(3), question, 10)
    assert [h.iri for h in mixed[:4]] == ["nyc", "ny", "yk", "pa"] and not mixed[3].lexical
    assert len({h.iri for h in mixed}) == len(mixed)
    await store.index.upsert(
        Tenant(user, coll), [("ny", "Big Apple", unit(1))], model="unit-test"
    )  # a relabelled entity
    hits = await store.index.search(Tenant(user, coll), None, question, 10)
    assert [h.iri for h in hits] == ["nyc", "yk"]


async def test_tenant_isolation(store: StoreBackend) -> None:
    tag = store.scope()[1]
    a, b, c = (
        store.scope("ua-" + tag, "ca-" + tag),
        store.scope("ua-" + tag, "cb-" + tag),
        store.scope("ub-" + tag, "ca-" + tag),
    )
    await store.triples.add_triples(Tenant(*a), GRAPH)
    await store.index.upsert(Tenant(*a), [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))], model="unit-test")
    await store.index.upsert(Tenant(*a), [("p1", "first", unit(3))], kind="predicate", model="unit-test")
    for other in (b, c):
        assert await store.triples.pattern(Tenant(*other), None, None, None, 100) == []
        assert await store.triples.pattern(Tenant(*other), iri("a"), None, None, 100) == []
        assert (await store.triples.neighbours(nq(*other, ["a", "b"], 10))).triples == []
        assert await store.triples.labels(Tenant(*other), ["a", "b"]) == {}
        assert await store.index.search(Tenant(*other), unit(1), "Alpha and Bee", 10) == []
        assert await store.index.vectors(Tenant(*other), ["a", "p1"]) == {}
    await store.triples.add_triples(Tenant(*b), [t("a", "p9", "zz"), t("a", RDFS_LABEL, Term.literal("Other"))])
    await store.index.upsert(Tenant(*c), [("a", "Alpha", unit(1)), ("zz", "Alpha Zulu", unit(1))], model="unit-test")
    assert set(await store.triples.pattern(Tenant(*a), iri("a"), None, None, 100)) == {
        x for x in GRAPH if x.s.value == "a"
    }
    assert await store.triples.labels(Tenant(*a), ["a"]) == {"a": "Alpha"}
    assert await store.triples.labels(Tenant(*b), ["a"]) == {"a": "Other"}
    hits = await store.index.search(Tenant(*a), unit(1), "Alpha Zulu", 10)
    assert {h.iri for h in hits} == {"a", "b"}
    assert {h.iri for h in await store.index.search(Tenant(*c), None, "Alpha Zulu", 10)} == {"a", "zz"}


async def test_delete_collection(store: StoreBackend) -> None:
    a, b = store.scope(), store.scope()
    for scope in (a, b):
        await store.triples.add_triples(Tenant(*scope), GRAPH)
        await store.index.upsert(Tenant(*scope), [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))], model="unit-test")
        await store.index.upsert(Tenant(*scope), [("p1", "first", unit(3))], kind="predicate", model="unit-test")
    await store.triples.delete_collection(Tenant(*a))
    await store.index.delete_collection(Tenant(*a))
    assert await store.triples.pattern(Tenant(*a), None, None, None, 100) == []
    assert (await store.triples.neighbours(nq(*a, ["a", "b", "c"], 10))).triples == []
    assert await store.triples.labels(Tenant(*a), ["a", "b"]) == {}
    assert await store.index.search(Tenant(*a), unit(1), "Alpha", 10) == []
    assert await store.index.vectors(Tenant(*a), ["a", "p1"]) == {}
    assert sorted(await store.triples.pattern(Tenant(*b), None, None, None, 100), key=repr) == sorted(GRAPH, key=repr)
    assert [h.iri for h in await store.index.search(Tenant(*b), unit(1), "Alpha", 10)][:2] == ["a", "b"]
    assert set(await store.index.vectors(Tenant(*b), ["a", "p1"])) == {"a", "p1"}
    await store.triples.add_triples(Tenant(*a), GRAPH[:1])  # the collection is usable again
    assert await store.triples.pattern(Tenant(*a), None, None, None, 100) == GRAPH[:1]


async def test_malformed_and_unknown_input(store: StoreBackend) -> None:
    user, coll = store.scope()
    for entities, limit in (([], 10), (["a"], 0)):  # an empty frontier or limit is refused before any store
        with pytest.raises(ValidationError):
            nq(user, coll, entities, limit, query_vector=unit(1), max_returned=3)
    assert await store.triples.labels(Tenant(user, coll), []) == {}
    assert await store.index.vectors(Tenant(user, coll), []) == {}
    assert await store.index.search(Tenant(user, coll), unit(1), "anything", 5) == []  # empty collection
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
    await store.index.upsert(Tenant(user, coll), [("a", "Alpha", unit(1))], model="unit-test")
    assert (await store.triples.neighbours(nq(user, coll, ["nope", "http://x/none"], 10))).triples == []
    assert await store.triples.pattern(Tenant(user, coll), iri("nope"), None, None, 10) == []
    assert await store.triples.pattern(Tenant(user, coll), None, iri("nope"), None, 10) == []
    assert await store.triples.pattern(Tenant(user, coll), None, None, None, 0) == []
    assert await store.triples.labels(Tenant(user, coll), ["nope"]) == {}
    assert await store.index.vectors(Tenant(user, coll), ["nope"]) == {}
    assert await store.index.search(Tenant(user, coll), None, "?! the of ...", 5) == []
    assert await store.index.search(Tenant(user, coll), None, None, 5) == []
    assert await store.index.search(Tenant(user, coll), None, "", 5) == []


async def test_factory_opens_distributed_backends(servers: Any, cassandra_conn: Any, tmp_path: Path) -> None:
    from processors.stores.factory import open_stores
    from processors.stores.settings import StoreSettings

    common = {
        "home": tmp_path,
        "cassandra_hosts": servers.cassandra_host,
        "cassandra_port": servers.cassandra_port,
        "cassandra_keyspace": cassandra_conn.keyspace,
        "neo4j_url": servers.neo4j_url,
    }
    for triples_backend, vectors_backend in (("cassandra", "neo4j"), ("neo4j", "neo4j"), ("cassandra", "cassandra")):
        stores = open_stores(StoreSettings(triples_backend=triples_backend, vectors_backend=vectors_backend, **common))
        user, coll = "factory", f"c-{triples_backend}-{vectors_backend}-{tmp_path.name}"
        try:
            assert type(stores.triples).__name__.lower().startswith(triples_backend)
            assert type(stores.entities).__name__.lower().startswith(vectors_backend)
            if triples_backend == vectors_backend:  # one connection per process for both stores
                assert stores.triples.conn is stores.entities.conn  # type: ignore[attr-defined]
            await stores.triples.add_triples(Tenant(user, coll), GRAPH[:2])
            await stores.entities.upsert(
                Tenant(user, coll), [("b", "Bee", unit(2)), ("c", "Sea", unit(3))], model="unit-test"
            )
            await stores.entities.upsert(
                Tenant(user, coll), [("p1", "first", unit(5))], kind="predicate", model="unit-test"
            )
            res = await stores.triples.neighbours(nq(user, coll, ["a"], 5, query_vector=unit(3), max_returned=1))
            assert res.triples == [GRAPH[1]]  # a -p1-> c: the far end is closest to the query
            await stores.triples.delete_collection(Tenant(user, coll))
            await stores.entities.delete_collection(Tenant(user, coll))
        finally:
            await stores.close()


async def test_vector_search_ignores_closer_entities_of_other_tenants(store: StoreBackend) -> None:
    mine, noisy = store.scope(), store.scope()
    query = unit(4242)
    # 150 entities of another tenant all closer to the query than any of ours (a global ANN
    # index, as in Neo4j, must not let them crowd our entities out)
    await store.index.upsert(
        Tenant(*noisy), [(f"n{i}", f"noise {i}", near(query, 5000 + i, 0.2)) for i in range(150)], model="unit-test"
    )
    ours = [(f"e{i}", f"entity {i}", near(query, 6000 + i, 1.5 + i / 4)) for i in range(4)]
    await store.index.upsert(Tenant(*mine), ours, model="unit-test")
    hits = await store.index.search(Tenant(*mine), query, None, 3)
    assert [h.iri for h in hits] == ["e0", "e1", "e2"]


async def test_remove_triples_removes_exactly_those(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
    gone = [t("a", "p1", "b"), t("b", RDFS_LABEL, Term.literal("Bee")), t("a", "age", Term.literal("42", XSD_INT))]
    await store.triples.remove_triples(Tenant(user, coll), [*gone, t("x", "p9", "y")])  # an absent triple is ignored
    left = await store.triples.pattern(Tenant(user, coll), None, None, None, 100)
    assert sorted(left, key=repr) == sorted([x for x in GRAPH if x not in gone], key=repr)
    assert await store.triples.labels(Tenant(user, coll), ["a", "b"]) == {"a": "Alpha"}
    other, _ = store.scope(user=user)
    await store.triples.add_triples(Tenant(user, other), GRAPH[:1])
    await store.triples.remove_triples(Tenant(user, other), GRAPH[:1])
    assert t("a", "p1", "c") in await store.triples.pattern(Tenant(user, coll), iri("a"), None, None, 100)


async def test_a_collection_whose_triples_are_all_removed_is_not_listed(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
    await store.triples.remove_triples(Tenant(user, coll), GRAPH)
    assert await store.triples.pattern(Tenant(user, coll), None, None, None, 100) == []
    listed = await store.triples.collections(user)
    if store.name != "cassandra":  # (Cassandra keeps a collection's name until it is deleted: -1)
        assert coll not in listed, listed


async def test_collections_of_a_user(store: StoreBackend) -> None:
    user, coll = store.scope()
    _, second = store.scope(user=user)
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
    await store.triples.add_triples(Tenant(user, second), GRAPH[:2])
    await store.index.upsert(Tenant(user, coll), [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))], model="unit-test")
    found = await store.triples.collections(user)
    assert set(found) == {coll, second}
    if found[coll] >= 0:  # a backend that counts cheaply counts exactly
        assert found == {coll: len(GRAPH), second: 2}
    assert (await store.index.collections(user))[coll] == 2
    assert await store.triples.collections(f"{user}-nobody") == {}


async def test_named_finds_entities_by_normalised_label_in_scope_only(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.index.upsert(
        Tenant(user, coll), [("x1", "Marie Curie", unit(1)), ("x2", "Pierre", unit(2))], model="unit-test"
    )
    await store.index.upsert(
        Tenant(user, coll), [("p", "Marie Curie", unit(3))], "predicate", model="unit-test"
    )  # predicates are not named
    other, _ = store.scope()
    await store.index.upsert(Tenant(other, coll), [("y", "Warsaw", unit(4))], model="unit-test")
    assert await store.index.named(Tenant(user, coll), ["marie curie", "warsaw", "pierre"]) == {
        "marie curie": "x1",
        "pierre": "x2",
    }
    await store.index.upsert(
        Tenant(user, coll), [("x2", "Pierre Curie", unit(2))], model="unit-test"
    )  # a relabelled entity
    assert await store.index.named(Tenant(user, coll), ["pierre", "pierre curie"]) == {"pierre curie": "x2"}
    await store.index.delete(Tenant(user, coll), ["x1"])
    assert await store.index.named(Tenant(user, coll), ["marie curie"]) == {}
    assert await store.index.vectors(Tenant(user, coll), ["x1", "x2"]) == {
        "x2": pytest.approx(unit(2), abs=store.cosine_tol)
    }


@pytest.mark.parametrize("store", ["neo4j"], indirect=True)
async def test_neo4j_vector_parameters_are_not_spelled_out(
    store: StoreBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver formats every query's parameters for a debug line whatever the log level: a
    vector parameter is named there, not spelled out (384 floats cost ~0.4 ms per query)."""
    user, coll = store.scope()
    await store.index.upsert(
        Tenant(user, coll), [(f"e{i}", f"entity {i}", unit(i)) for i in range(5)], model="unit-test"
    )
    query = near(unit(2), 9, 0.6)
    with caplog.at_level(logging.DEBUG, logger="neo4j"):
        hits = await store.index.search(Tenant(user, coll), query, None, 3)
    assert hits[0].iri == "e2"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "RUN" in logged and "<vector of 384 floats>" in logged  # the query was logged, its vector named
    assert repr(max(query)) not in logged and repr(float(np.float32(max(query)))) not in logged

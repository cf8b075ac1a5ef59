"""One contract for every store backend: SQLite + local index, Cassandra, Neo4j.

Each test runs on all three (the `store` fixture is parametrized) and compares the backend's
answer with an oracle computed here from the same inputs, so no backend can drift.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from processors.retrieval.relevance.fair_share import best
from processors.retrieval.relevance.paths import path_cosines
from processors.retrieval.relevance.scoring import combine, cosines
from schemas.terms import RDFS_LABEL, Term, Triple
from tests.integration.store_fixtures import StoreBackend, iri, near, nq, t, unit

pytestmark = pytest.mark.usefixtures("servers")

XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"
GRAPH = [
    t("a", "p1", "b"),
    t("a", "p1", "c"),
    t("a", "p2", "c"),
    t("b", "p2", "c"),
    t("c", "p3", "a"),
    t("d", "p1", "a"),
    t("a", RDFS_LABEL, Term.literal("Alpha")),
    t("b", RDFS_LABEL, Term.literal("Bee")),
    t("a", "age", Term.literal("42", XSD_INT)),
    t("a", "name", Term.literal("Alpha", language="en")),
    t("a", "name", Term.literal("Alpha")),
    t("a", "ref", Term.literal("b")),  # a literal whose text equals an IRI
]


def matches(tr: Triple, s: Term | None, p: Term | None, o: Term | None) -> bool:
    """The pattern semantics every backend implements."""
    return (s is None or tr.s.value == s.value) and (p is None or tr.p.value == p.value) and (o is None or tr.o == o)


def out_edges(graph: list[Triple], e: str) -> list[Triple]:
    """Non-label edges leaving `e`."""
    return [x for x in graph if x.s.value == e and x.p.value != RDFS_LABEL]


def in_edges(graph: list[Triple], e: str) -> list[Triple]:
    """Non-label edges arriving at the IRI `e`."""
    return [x for x in graph if x.o.is_iri and x.o.value == e and x.p.value != RDFS_LABEL]


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
    assert await store.triples.add_triples(user, coll, GRAPH) > 0
    await store.triples.add_triples(user, coll, GRAPH[:4])  # duplicates are ignored
    for s, p, o in PATTERNS:
        got = await store.triples.pattern(user, coll, s, p, o, 100)
        want = [x for x in GRAPH if matches(x, s, p, o)]
        assert sorted(got, key=repr) == sorted(want, key=repr), (s, p, o)
    some = await store.triples.pattern(user, coll, None, None, None, 3)
    assert len(some) == 3 and set(some) <= set(GRAPH)
    assert len(await store.triples.pattern(user, coll, iri("a"), None, None, 2)) == 2


async def test_neighbours_both_directions(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(user, coll, GRAPH)
    frontier = ["a", "b"]
    for direction in ("out", "in", "both"):
        res = await store.triples.neighbours(nq(user, coll, frontier, 10, direction))
        outs = [x for e in frontier for x in out_edges(GRAPH, e)] if direction != "in" else []
        ins = [x for e in frontier for x in in_edges(GRAPH, e)] if direction != "out" else []
        assert set(res.triples) == set(outs + ins), direction
        assert len(res.triples) == len(set(outs + ins))  # an edge found twice is returned once
        assert res.rows_read == len(outs) + len(ins)
        assert res.scores == [None] * len(res.triples)
        assert all(x.p.value != RDFS_LABEL for x in res.triples)


async def test_neighbours_limit_per_entity(store: StoreBackend) -> None:
    user, coll = store.scope()
    hub = [t("h", f"q{i % 2}", f"x{i}") for i in range(5)] + [t(f"y{i}", "q", "h") for i in range(4)]
    graph = [*hub, t("z", "q", "x0"), t("h", RDFS_LABEL, Term.literal("Hub"))]
    await store.triples.add_triples(user, coll, graph)
    res = await store.triples.neighbours(nq(user, coll, ["h"], 2, "both"))
    assert len([x for x in res.triples if x.s.value == "h"]) == 2
    assert len([x for x in res.triples if x.o.value == "h"]) == 2
    assert set(res.triples) <= set(hub) and res.rows_read == 4
    res = await store.triples.neighbours(nq(user, coll, ["h", "z"], 2, "out"))
    assert len(res.triples) == 3 and t("z", "q", "x0") in res.triples and res.rows_read == 3
    res = await store.triples.neighbours(nq(user, coll, ["x0"], 1, "in"))
    assert len(res.triples) == 1 and res.triples[0] in (t("h", "q0", "x0"), t("z", "q", "x0"))


async def test_neighbours_read_each_entity_in_key_order(store: StoreBackend) -> None:
    user, coll = store.scope()
    # inserted out of order, so a backend returning insertion or hash order fails
    out = [t("h", p, o) for p, o in (("r2", "x1"), ("r1", "x9"), ("r2", "x0"), ("r1", "x3"), ("r3", "x2"))]
    into = [t(s, p, "h") for s, p in (("y5", "r2"), ("y9", "r1"), ("y1", "r2"), ("y0", "r3"), ("y3", "r1"))]
    await store.triples.add_triples(user, coll, out + into + [t("h", "r0", Term.literal("lit"))])
    res = await store.triples.neighbours(nq(user, coll, ["h"], 3, "out"))
    assert res.triples == [t("h", "r0", Term.literal("lit")), t("h", "r1", "x3"), t("h", "r1", "x9")]
    res = await store.triples.neighbours(nq(user, coll, ["h"], 3, "in"))
    assert res.triples == [t("y3", "r1", "h"), t("y9", "r1", "h"), t("y1", "r2", "h")]


async def test_neighbours_focus_predicates_reach_past_the_per_entity_limit(store: StoreBackend) -> None:
    user, coll = store.scope()
    hub = [t("h", "a", f"x{i:02}") for i in range(12)] + [t("h", "z", f"w{i}") for i in (3, 1, 2)]
    hub += [t(f"y{i:02}", "a", "h") for i in range(12)] + [t(f"v{i}", "z", "h") for i in (2, 0, 1)]
    await store.triples.add_triples(user, coll, [*hub, t("h", RDFS_LABEL, Term.literal("Hub"))])
    plain = await store.triples.neighbours(nq(user, coll, ["h"], 2, "both"))
    assert not any(x.p.value == "z" for x in plain.triples)  # the hub's "z" edges sort after its "a" edges
    res = await store.triples.neighbours(nq(user, coll, ["h"], 2, "both", focus=["z", RDFS_LABEL], focus_limit=2))
    assert res.triples == [
        t("h", "a", "x00"), t("h", "a", "x01"), t("y00", "a", "h"), t("y01", "a", "h"),
        t("h", "z", "w1"), t("h", "z", "w2"), t("v0", "z", "h"), t("v1", "z", "h"),
    ]  # fmt: skip
    assert res.rows_read == 8
    both = await store.triples.neighbours(nq(user, coll, ["h"], 20, "out", focus=["z"], focus_limit=2))
    # every edge is in the first read: focus rows are read again (17) or, when a backend sees that, skipped (15)
    assert len(both.triples) == 15 and both.rows_read in (15, 17)


async def test_focus_predicates_the_first_read_holds_are_not_read_again(
    store: StoreBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Edges come in predicate order: a focus predicate sorting before the last edge read of an
    entity has every edge in that read, so it costs no query; one sorting at or after it does."""
    user, coll = store.scope()
    hub = [t("h", "a", "x0"), t("h", "a", "x1"), *(t("h", "m", f"y{i}") for i in range(5)), t("h", "z", "w0")]
    hub += [t("h", "m", "y9"), t("u", "a", "h"), t("v", "b", "h")]
    await store.triples.add_triples(user, coll, hub)
    calls = count_store_calls(store, monkeypatch)
    res = await store.triples.neighbours(nq(user, coll, ["h"], 3, "both", focus=["a"], focus_limit=2))
    assert res.triples == [t("h", "a", "x0"), t("h", "a", "x1"), t("h", "m", "y0"), t("u", "a", "h"), t("v", "b", "h")]
    assert res.rows_read == 5 if store.name == "cassandra" else res.rows_read >= 5
    skipped = len(calls)
    res = await store.triples.neighbours(nq(user, coll, ["h"], 3, "out", focus=["a", "m", "z"], focus_limit=2))
    out = [t("h", "a", "x0"), t("h", "a", "x1"), t("h", "m", "y0"), t("h", "m", "y1"), t("h", "z", "w0")]
    assert res.triples == out
    if store.name == "cassandra":  # the first read only; then it and one focus read per "m" and "z"
        assert (skipped, len(calls)) == (1, 3), calls


async def test_nearest_predicates(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.index.upsert(user, coll, [(f"r{i}", f"relation {i}", unit(300 + i)) for i in range(12)], "predicate")
    await store.index.upsert(user, coll, [("e", "an entity", unit(301))])  # entities are never predicate hits
    query = near(unit(305), 77, 0.5)
    sims = {f"r{i}": float(np.dot(unit(300 + i), query)) for i in range(12)}
    want = sorted(sims, key=lambda k: -sims[k])[:3]
    hits = await store.index.nearest_predicates(user, coll, query, 3)
    assert [h.iri for h in hits] == want and want[0] == "r5"
    assert [h.score for h in hits] == pytest.approx([sims[k] for k in want], abs=1e-5)
    assert hits[0].label == "relation 5"
    assert await store.index.nearest_predicates(*store.scope(), query, 3) == []  # another tenant has none


async def test_neighbours_scored_by_query_vector(store: StoreBackend) -> None:
    user, coll = store.scope()
    graph = [t("h", f"r{i % 3}", f"x{i}") for i in range(8)]
    graph += [t(f"w{i}", f"r{i % 3}", "g") for i in range(5)]
    graph += [t("h", "r9", Term.literal("a literal")), t("h", "r1", "novec"), t("h", "r0", "g")]
    await store.triples.add_triples(user, coll, graph)
    ents = [f"x{i}" for i in range(8)] + [f"w{i}" for i in range(5)] + ["g", "h"]
    await store.index.upsert(user, coll, [(e, f"label {e}", unit(100 + n)) for n, e in enumerate(ents)])
    await store.index.upsert(user, coll, [(f"r{i}", f"rel {i}", unit(200 + i)) for i in range(3)], kind="predicate")
    query = near(unit(201), 7, 0.8)

    # oracle: all candidate edges, scored with the stored vectors, budgeted fairly per frontier entity
    frontier = ["h", "g"]
    cand = [(x, e) for e in frontier for x in out_edges(graph, e)] + [
        (x, e) for e in frontier for x in in_edges(graph, e)
    ]
    seen: set[Triple] = set()
    uniq = [(x, e) for x, e in cand if not (x in seen or seen.add(x))]  # first finder wins, as in the stores
    vecs = {**{e: unit(100 + n) for n, e in enumerate(ents)}, **{f"r{i}": unit(200 + i) for i in range(3)}}
    far = [x.o.value if x.s.value == e else x.s.value for x, e in uniq]
    pairs = [(x.p.value, f) for (x, _), f in zip(uniq, far, strict=True)]
    scores = combine(pairs, cosines(query, [*(p for p, _ in pairs), *far], vecs))
    keep = best(scores, 6, [e for _, e in uniq])

    res = await store.triples.neighbours(nq(user, coll, frontier, 50, "both", query_vector=query, max_returned=6))
    assert res.triples == [uniq[i][0] for i in keep]
    assert res.scores == pytest.approx([scores[i] for i in keep], abs=1e-5)
    assert len(res.triples) == 6 and res.scores[0] == pytest.approx(max(scores), abs=1e-5)

    # with a path to "g" (reached through r2, then r1), its edges' relations continue that path
    pth = ("r2", "r1")
    rel = path_cosines(query, [(), pth], ["r0", "r1", "r2", "r9"], vecs)
    far_sim = cosines(query, far, vecs)
    literal = [not x.o.is_iri and e == x.s.value for x, e in uniq]
    path_scores = [
        0.9 * rel[pth if e == "g" else (), x.p.value] + 0.1 * (0.0 if lit else far_sim.get(f, 0.0))
        for (x, e), f, lit in zip(uniq, far, literal, strict=True)
    ]
    assert any(abs(a - b) > 1e-3 for a, b in zip(path_scores, scores, strict=True))  # the path matters here
    keep = best(path_scores, 6, [e for _, e in uniq])
    res = await store.triples.neighbours(nq(user, coll, frontier, 50, "both", query, 6, paths={"g": list(pth)}))
    assert res.triples == [uniq[i][0] for i in keep]
    assert res.scores == pytest.approx([path_scores[i] for i in keep], abs=1e-5)


async def test_labels_batched(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(user, coll, GRAPH)
    assert await store.triples.labels(user, coll, ["a", "b", "c", "nope"]) == {"a": "Alpha", "b": "Bee"}
    await store.triples.add_triples(user, coll, [t("c", RDFS_LABEL, Term.literal("Sea"))])
    assert await store.triples.labels(user, coll, ["c", "a", "c"]) == {"a": "Alpha", "c": "Sea"}


async def test_entity_vector_search_top_k(store: StoreBackend) -> None:
    user, coll = store.scope()
    items = [(f"e{i}", f"entity {i}", unit(i)) for i in range(20)]
    await store.index.upsert(user, coll, items)
    query = near(unit(7), 99, 0.6)
    await store.index.upsert(user, coll, [("pred", "a predicate", query)], kind="predicate")  # never a hit
    m = np.asarray([v for _, _, v in items], dtype=np.float32)
    sims = m @ np.asarray(query, dtype=np.float32)
    order = np.argsort(-sims)[:5]
    hits = await store.index.search(user, coll, query, None, 5)
    assert [h.iri for h in hits] == [f"e{i}" for i in order]
    assert [h.score for h in hits] == pytest.approx([float(sims[i]) for i in order], abs=1e-5)
    assert not any(h.lexical for h in hits) and hits[0].iri == "e7" and hits[0].label == "entity 7"
    got = await store.index.vectors(user, coll, ["e3", "pred", "unknown"])
    assert set(got) == {"e3", "pred"} and np.allclose(got["e3"], unit(3), atol=1e-6)


async def test_lexical_exact_phrase_match(store: StoreBackend) -> None:
    user, coll = store.scope()
    labels = {"nyc": "New York City", "ny": "New York", "yk": "York", "pa": "Paris", "coy": "City of York", "th": "The"}
    await store.index.upsert(user, coll, [(k, v, unit(n)) for n, (k, v) in enumerate(labels.items())])
    question = "Which river flows through New York City? The big one"
    hits = await store.index.search(user, coll, None, question, 10)
    assert [(h.iri, h.lexical) for h in hits] == [("nyc", True), ("ny", True), ("yk", True)]
    assert [h.label for h in hits] == ["New York City", "New York", "York"]
    mixed = await store.index.search(user, coll, unit(3), question, 10)
    assert [h.iri for h in mixed[:4]] == ["nyc", "ny", "yk", "pa"] and not mixed[3].lexical
    assert len({h.iri for h in mixed}) == len(mixed)
    await store.index.upsert(user, coll, [("ny", "Big Apple", unit(1))])  # a relabelled entity
    hits = await store.index.search(user, coll, None, question, 10)
    assert [h.iri for h in hits] == ["nyc", "yk"]


async def test_tenant_isolation(store: StoreBackend) -> None:
    tag = store.scope()[1]
    a, b, c = (
        store.scope("ua-" + tag, "ca-" + tag),
        store.scope("ua-" + tag, "cb-" + tag),
        store.scope("ub-" + tag, "ca-" + tag),
    )
    await store.triples.add_triples(*a, GRAPH)
    await store.index.upsert(*a, [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))])
    await store.index.upsert(*a, [("p1", "first", unit(3))], kind="predicate")
    for other in (b, c):
        assert await store.triples.pattern(*other, None, None, None, 100) == []
        assert await store.triples.pattern(*other, iri("a"), None, None, 100) == []
        assert (await store.triples.neighbours(nq(*other, ["a", "b"], 10))).triples == []
        assert await store.triples.labels(*other, ["a", "b"]) == {}
        assert await store.index.search(*other, unit(1), "Alpha and Bee", 10) == []
        assert await store.index.vectors(*other, ["a", "p1"]) == {}
    await store.triples.add_triples(*b, [t("a", "p9", "zz"), t("a", RDFS_LABEL, Term.literal("Other"))])
    await store.index.upsert(*c, [("a", "Alpha", unit(1)), ("zz", "Alpha Zulu", unit(1))])
    assert set(await store.triples.pattern(*a, iri("a"), None, None, 100)) == {x for x in GRAPH if x.s.value == "a"}
    assert await store.triples.labels(*a, ["a"]) == {"a": "Alpha"}
    assert await store.triples.labels(*b, ["a"]) == {"a": "Other"}
    hits = await store.index.search(*a, unit(1), "Alpha Zulu", 10)
    assert {h.iri for h in hits} == {"a", "b"}
    assert {h.iri for h in await store.index.search(*c, None, "Alpha Zulu", 10)} == {"a", "zz"}


async def test_delete_collection(store: StoreBackend) -> None:
    a, b = store.scope(), store.scope()
    for scope in (a, b):
        await store.triples.add_triples(*scope, GRAPH)
        await store.index.upsert(*scope, [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))])
        await store.index.upsert(*scope, [("p1", "first", unit(3))], kind="predicate")
    await store.triples.delete_collection(*a)
    await store.index.delete_collection(*a)
    assert await store.triples.pattern(*a, None, None, None, 100) == []
    assert (await store.triples.neighbours(nq(*a, ["a", "b", "c"], 10))).triples == []
    assert await store.triples.labels(*a, ["a", "b"]) == {}
    assert await store.index.search(*a, unit(1), "Alpha", 10) == []
    assert await store.index.vectors(*a, ["a", "p1"]) == {}
    assert sorted(await store.triples.pattern(*b, None, None, None, 100), key=repr) == sorted(GRAPH, key=repr)
    assert [h.iri for h in await store.index.search(*b, unit(1), "Alpha", 10)][:2] == ["a", "b"]
    assert set(await store.index.vectors(*b, ["a", "p1"])) == {"a", "p1"}
    await store.triples.add_triples(*a, GRAPH[:1])  # the collection is usable again
    assert await store.triples.pattern(*a, None, None, None, 100) == GRAPH[:1]


async def test_malformed_and_unknown_input(store: StoreBackend) -> None:
    user, coll = store.scope()
    for entities, limit in (([], 10), (["a"], 0)):  # an empty frontier or limit is refused before any store
        with pytest.raises(ValidationError):
            nq(user, coll, entities, limit, query_vector=unit(1), max_returned=3)
    assert await store.triples.labels(user, coll, []) == {}
    assert await store.index.vectors(user, coll, []) == {}
    assert await store.index.search(user, coll, unit(1), "anything", 5) == []  # empty collection
    await store.triples.add_triples(user, coll, GRAPH)
    await store.index.upsert(user, coll, [("a", "Alpha", unit(1))])
    assert (await store.triples.neighbours(nq(user, coll, ["nope", "http://x/none"], 10))).triples == []
    assert await store.triples.pattern(user, coll, iri("nope"), None, None, 10) == []
    assert await store.triples.pattern(user, coll, None, iri("nope"), None, 10) == []
    assert await store.triples.pattern(user, coll, None, None, None, 0) == []
    assert await store.triples.labels(user, coll, ["nope"]) == {}
    assert await store.index.vectors(user, coll, ["nope"]) == {}
    assert await store.index.search(user, coll, None, "?! the of ...", 5) == []
    assert await store.index.search(user, coll, None, None, 5) == []
    assert await store.index.search(user, coll, None, "", 5) == []


async def test_factory_opens_distributed_backends(servers: Any, cassandra_conn: Any, tmp_path: Path) -> None:
    from processors.base.settings import StoreSettings
    from processors.stores.factory import open_stores

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
            await stores.triples.add_triples(user, coll, GRAPH[:2])
            await stores.entities.upsert(user, coll, [("b", "Bee", unit(2)), ("c", "Sea", unit(3))])
            await stores.entities.upsert(user, coll, [("p1", "first", unit(5))], kind="predicate")
            res = await stores.triples.neighbours(nq(user, coll, ["a"], 5, query_vector=unit(3), max_returned=1))
            assert res.triples == [GRAPH[1]]  # a -p1-> c: the far end is closest to the query
            await stores.triples.delete_collection(user, coll)
            await stores.entities.delete_collection(user, coll)
        finally:
            await stores.close()


def count_store_calls(store: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The store's queries from now on, one entry per call to its connection (a logical round trip)."""
    target: Any = store.triples.db if store.name == "sqlite" else store.triples.conn  # type: ignore[attr-defined]
    methods = {"sqlite": ("read",), "cassandra": ("run", "run_many"), "neo4j": ("read",)}[store.name]
    calls: list[str] = []
    for name in methods:
        original = getattr(target, name)

        async def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls.append(_name)
            return await _original(*args, **kwargs)

        monkeypatch.setattr(target, name, counted)
    return calls


async def test_batched_calls_are_one_round_trip(store: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(user, coll, GRAPH)
    calls = count_store_calls(store, monkeypatch)
    res = await store.triples.neighbours(nq(user, coll, ["a", "b", "c", "d"], 10, "both"))
    assert len(res.triples) == 10 and len(calls) == 1, calls
    assert await store.triples.labels(user, coll, ["a", "b", "c", "d"]) == {"a": "Alpha", "b": "Bee"}
    assert len(calls) == 2, calls


async def test_scored_neighbours_read_what_they_rank_with_in_few_calls(
    store: StoreBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scored hop with paths reads its edges, the far ends' similarities and the predicates'
    vectors together: one query on Neo4j, one per kind of read elsewhere."""
    user, coll = store.scope()
    await store.triples.add_triples(user, coll, GRAPH)
    await store.index.upsert(user, coll, [(e, f"label {e}", unit(300 + n)) for n, e in enumerate("abcd")])
    preds = sorted({tr.p.value for tr in GRAPH} - {RDFS_LABEL})
    await store.index.upsert(user, coll, [(p, p, unit(400 + n)) for n, p in enumerate(preds)], kind="predicate")
    calls = count_store_calls(store, monkeypatch)
    query = near(unit(301), 9, 0.5)
    res = await store.triples.neighbours(nq(user, coll, ["a", "b"], 10, "both", query, 4, paths={"b": preds[:1]}))
    assert len(res.triples) == 4 and all(s is not None for s in res.scores)
    assert len(calls) == {"sqlite": 1, "cassandra": 2, "neo4j": 1}[store.name], calls


async def test_vector_search_ignores_closer_entities_of_other_tenants(store: StoreBackend) -> None:
    mine, noisy = store.scope(), store.scope()
    query = unit(4242)
    # 150 entities of another tenant all closer to the query than any of ours (a global ANN
    # index, as in Neo4j, must not let them crowd our entities out)
    await store.index.upsert(*noisy, [(f"n{i}", f"noise {i}", near(query, 5000 + i, 0.2)) for i in range(150)])
    ours = [(f"e{i}", f"entity {i}", near(query, 6000 + i, 1.5 + i / 4)) for i in range(4)]
    await store.index.upsert(*mine, ours)
    hits = await store.index.search(*mine, query, None, 3)
    assert [h.iri for h in hits] == ["e0", "e1", "e2"]


async def test_remove_triples_removes_exactly_those(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(user, coll, GRAPH)
    gone = [t("a", "p1", "b"), t("b", RDFS_LABEL, Term.literal("Bee")), t("a", "age", Term.literal("42", XSD_INT))]
    await store.triples.remove_triples(user, coll, [*gone, t("x", "p9", "y")])  # an absent triple is ignored
    left = await store.triples.pattern(user, coll, None, None, None, 100)
    assert sorted(left, key=repr) == sorted([x for x in GRAPH if x not in gone], key=repr)
    assert await store.triples.labels(user, coll, ["a", "b"]) == {"a": "Alpha"}
    other, _ = store.scope(user=user)
    await store.triples.add_triples(user, other, GRAPH[:1])
    await store.triples.remove_triples(user, other, GRAPH[:1])
    assert t("a", "p1", "c") in await store.triples.pattern(user, coll, iri("a"), None, None, 100)


async def test_collections_of_a_user(store: StoreBackend) -> None:
    user, coll = store.scope()
    _, second = store.scope(user=user)
    await store.triples.add_triples(user, coll, GRAPH)
    await store.triples.add_triples(user, second, GRAPH[:2])
    await store.index.upsert(user, coll, [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))])
    found = await store.triples.collections(user)
    assert set(found) == {coll, second}
    if found[coll] >= 0:  # a backend that counts cheaply counts exactly
        assert found == {coll: len(GRAPH), second: 2}
    assert (await store.index.collections(user))[coll] == 2
    assert await store.triples.collections(f"{user}-nobody") == {}


async def test_named_finds_entities_by_normalised_label_in_scope_only(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.index.upsert(user, coll, [("x1", "Marie Curie", unit(1)), ("x2", "Pierre", unit(2))])
    await store.index.upsert(user, coll, [("p", "Marie Curie", unit(3))], "predicate")  # predicates are not named
    other, _ = store.scope()
    await store.index.upsert(other, coll, [("y", "Warsaw", unit(4))])
    assert await store.index.named(user, coll, ["marie curie", "warsaw", "pierre"]) == {
        "marie curie": "x1",
        "pierre": "x2",
    }
    await store.index.upsert(user, coll, [("x2", "Pierre Curie", unit(2))])  # a relabelled entity
    assert await store.index.named(user, coll, ["pierre", "pierre curie"]) == {"pierre curie": "x2"}
    await store.index.delete(user, coll, ["x1"])
    assert await store.index.named(user, coll, ["marie curie"]) == {}
    assert await store.index.vectors(user, coll, ["x1", "x2"]) == {"x2": pytest.approx(unit(2), abs=1e-5)}


@pytest.mark.parametrize("store", ["neo4j"], indirect=True)
async def test_neo4j_vector_parameters_are_not_spelled_out(
    store: StoreBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver formats every query's parameters for a debug line whatever the log level: a
    vector parameter is named there, not spelled out (384 floats cost ~0.4 ms per query)."""
    user, coll = store.scope()
    await store.index.upsert(user, coll, [(f"e{i}", f"entity {i}", unit(i)) for i in range(5)])
    query = near(unit(2), 9, 0.6)
    with caplog.at_level(logging.DEBUG, logger="neo4j"):
        hits = await store.index.search(user, coll, query, None, 3)
    assert hits[0].iri == "e2"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "RUN" in logged and "<vector of 384 floats>" in logged  # the query was logged, its vector named
    assert repr(max(query)) not in logged and repr(float(np.float32(max(query)))) not in logged

"""The neighbour-query part of the store contract: each backend's frontier reads, focus
predicates, scoring and the number of store calls a hop makes, against oracles computed here."""

from __future__ import annotations

import pytest

from processors.algorithms.edges import best_edges, edge_scores, path_cosine_table
from processors.algorithms.vectors import cosines
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from tests.integration.store_fixtures import GRAPH, StoreBackend, count_store_calls, near, nq, t, unit

pytestmark = pytest.mark.usefixtures("servers")


def out_edges(graph: list[Triple], e: str) -> list[Triple]:
    """Non-label edges leaving `e`."""
    return [x for x in graph if x.s.value == e and x.p.value != RDFS_LABEL]


def in_edges(graph: list[Triple], e: str) -> list[Triple]:
    """Non-label edges arriving at the IRI `e`."""
    return [x for x in graph if x.o.is_iri and x.o.value == e and x.p.value != RDFS_LABEL]


async def test_neighbours_both_directions(store: StoreBackend) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
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
    await store.triples.add_triples(Tenant(user, coll), graph)
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
    await store.triples.add_triples(Tenant(user, coll), out + into + [t("h", "r0", Term.literal("lit"))])
    res = await store.triples.neighbours(nq(user, coll, ["h"], 3, "out"))
    assert res.triples == [t("h", "r0", Term.literal("lit")), t("h", "r1", "x3"), t("h", "r1", "x9")]
    res = await store.triples.neighbours(nq(user, coll, ["h"], 3, "in"))
    assert res.triples == [t("y3", "r1", "h"), t("y9", "r1", "h"), t("y1", "r2", "h")]


async def test_neighbours_focus_predicates_reach_past_the_per_entity_limit(store: StoreBackend) -> None:
    user, coll = store.scope()
    hub = [t("h", "a", f"x{i:02}") for i in range(12)] + [t("h", "z", f"w{i}") for i in (3, 1, 2)]
    hub += [t(f"y{i:02}", "a", "h") for i in range(12)] + [t(f"v{i}", "z", "h") for i in (2, 0, 1)]
    await store.triples.add_triples(Tenant(user, coll), [*hub, t("h", RDFS_LABEL, Term.literal("Hub"))])
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
    await store.triples.add_triples(Tenant(user, coll), hub)
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


async def test_neighbours_scored_by_query_vector(store: StoreBackend) -> None:
    user, coll = store.scope()
    graph = [t("h", f"r{i % 3}", f"x{i}") for i in range(8)]
    graph += [t(f"w{i}", f"r{i % 3}", "g") for i in range(5)]
    graph += [t("h", "r9", Term.literal("a literal")), t("h", "r1", "novec"), t("h", "r0", "g")]
    await store.triples.add_triples(Tenant(user, coll), graph)
    ents = [f"x{i}" for i in range(8)] + [f"w{i}" for i in range(5)] + ["g", "h"]
    await store.index.upsert(
        Tenant(user, coll), [(e, f"label {e}", unit(100 + n)) for n, e in enumerate(ents)], model="unit-test"
    )
    await store.index.upsert(
        Tenant(user, coll),
        [(f"r{i}", f"rel {i}", unit(200 + i)) for i in range(3)],
        kind="predicate",
        model="unit-test",
    )
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
    scores = edge_scores([p for p, _ in pairs], far, cosines(query, [*(p for p, _ in pairs), *far], vecs)).tolist()
    keep = best_edges(scores, 6, [e for _, e in uniq])

    res = await store.triples.neighbours(nq(user, coll, frontier, 50, "both", query_vector=query, max_returned=6))
    assert res.triples == [uniq[i][0] for i in keep]
    assert res.scores == pytest.approx([scores[i] for i in keep], abs=store.cosine_tol)
    assert len(res.triples) == 6 and res.scores[0] == pytest.approx(max(scores), abs=store.cosine_tol)

    # with a path to "g" (reached through r2, then r1), its edges' relations continue that path
    pth = ("r2", "r1")
    table = path_cosine_table(query, [(), pth], ["r0", "r1", "r2", "r9"], vecs)
    rel = {
        (path, p): float(table[i, j])
        for i, path in enumerate([(), pth])
        for j, p in enumerate(["r0", "r1", "r2", "r9"])
    }
    far_sim = cosines(query, far, vecs)
    literal = [not x.o.is_iri and e == x.s.value for x, e in uniq]
    path_scores = [
        0.9 * rel[pth if e == "g" else (), x.p.value] + 0.1 * (0.0 if lit else far_sim.get(f, 0.0))
        for (x, e), f, lit in zip(uniq, far, literal, strict=True)
    ]
    assert any(abs(a - b) > 1e-3 for a, b in zip(path_scores, scores, strict=True))  # the path matters here
    keep = best_edges(path_scores, 6, [e for _, e in uniq])
    res = await store.triples.neighbours(nq(user, coll, frontier, 50, "both", query, 6, paths={"g": list(pth)}))
    assert res.triples == [uniq[i][0] for i in keep]
    assert res.scores == pytest.approx([path_scores[i] for i in keep], abs=store.cosine_tol)


async def test_batched_calls_are_one_round_trip(store: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
    calls = count_store_calls(store, monkeypatch)
    res = await store.triples.neighbours(nq(user, coll, ["a", "b", "c", "d"], 10, "both"))
    assert len(res.triples) == 10 and len(calls) == 1, calls
    assert await store.triples.labels(Tenant(user, coll), ["a", "b", "c", "d"]) == {"a": "Alpha", "b": "Bee"}
    assert len(calls) == 2, calls


async def test_scored_neighbours_read_what_they_rank_with_in_few_calls(
    store: StoreBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scored hop with paths reads its edges, the far ends' similarities and the predicates'
    vectors together: one query on Neo4j, one per kind of read elsewhere."""
    user, coll = store.scope()
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
    await store.index.upsert(
        Tenant(user, coll), [(e, f"label {e}", unit(300 + n)) for n, e in enumerate("abcd")], model="unit-test"
    )
    preds = sorted({tr.p.value for tr in GRAPH} - {RDFS_LABEL})
    await store.index.upsert(
        Tenant(user, coll), [(p, p, unit(400 + n)) for n, p in enumerate(preds)], kind="predicate", model="unit-test"
    )
    calls = count_store_calls(store, monkeypatch)
    query = near(unit(301), 9, 0.5)
    res = await store.triples.neighbours(nq(user, coll, ["a", "b"], 10, "both", query, 4, paths={"b": preds[:1]}))
    assert len(res.triples) == 4 and all(s is not None for s in res.scores)
    assert len(calls) == {"sqlite": 1, "cassandra": 2, "neo4j": 1}[store.name], calls

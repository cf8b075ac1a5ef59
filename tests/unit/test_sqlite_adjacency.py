"""The SQLite store's adjacency held in memory: the same edges, in the same order, as its SQL
scans, and never stale after a write by this or another store on the same file."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest

from processors.algorithms.bfs import DistanceSearch, shortest_distances
from processors.stores.sqlite import triples as sqlite_triples
from processors.stores.sqlite.triples import SqliteTripleStore
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple


def iri(name: str) -> str:
    return f"http://example.org/{name}"


def edge(s: str, p: str, o: str) -> Triple:
    return Triple(s=Term.iri(iri(s)), p=Term.iri(iri(p)), o=Term.iri(iri(o)))


KNOWS = "ada bob, ada carl, bob carl, carl ada, eve ada"  # and ada admires dora
GRAPH = [
    *(edge(a, "knows", b) for a, b in (pair.split() for pair in KNOWS.split(", "))),
    edge("ada", "admires", "dora"),
    Triple(s=Term.iri(iri("ada")), p=Term.iri(iri("age")), o=Term.literal("36")),  # a literal among ada's first edges
    Triple(s=Term.iri(iri("ada")), p=Term.iri(RDFS_LABEL), o=Term.literal("Ada")),
]
FRONTIERS = [["ada"], ["bob", "carl", "nobody"], ["ada", "eve", "ada"], ["dora"]]


async def reads(store: SqliteTripleStore, coll: str = "kb") -> list[list[tuple[str, str]]]:
    return [
        await store.adjacent(Tenant("alice", coll), [iri(x) for x in frontier], per)
        for frontier in FRONTIERS
        for per in (1, 2, 30)
    ]


async def test_held_adjacency_reads_what_the_sql_scans_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SqliteTripleStore(tmp_path / "graph.db")
    try:
        await store.add_triples(Tenant("alice", "kb"), GRAPH)
        held = await reads(store)
        monkeypatch.setattr(sqlite_triples, "MAX_HELD_EDGES", 0)  # too big to hold: the SQL scans
        store._held.clear()
        assert await reads(store) == held
        # per entity and direction, the first edges in key order: ada admires dora (then the age
        # literal, no entity edge); carl, then eve, knows ada
        assert held[0] == [(iri("ada"), iri("dora")), (iri("carl"), iri("ada"))]
        assert held[1] == [(iri("ada"), iri("dora")), (iri("carl"), iri("ada")), (iri("eve"), iri("ada"))]
        assert (iri("ada"), iri("bob")) in held[2] and (iri("eve"), iri("ada")) in held[2]
        assert await store.adjacent(Tenant("alice", "other"), [iri("ada")], 30) == []
        assert await store.adjacent(Tenant("mallory", "kb"), [iri("ada")], 30) == []
    finally:
        await store.db.close()


async def test_writes_by_any_store_on_the_file_are_seen_at_once(tmp_path: Path) -> None:
    reader, writer = SqliteTripleStore(tmp_path / "graph.db"), SqliteTripleStore(tmp_path / "graph.db")
    try:
        await writer.add_triples(Tenant("alice", "kb"), GRAPH)
        before = await reader.adjacent(Tenant("alice", "kb"), [iri("dora")], 30)
        assert before == [(iri("ada"), iri("dora"))]
        await writer.add_triples(Tenant("alice", "kb"), [edge("dora", "knows", "eve")])  # another process's write
        assert await reader.adjacent(Tenant("alice", "kb"), [iri("dora")], 30) == [(iri("dora"), iri("eve")), *before]
        await writer.remove_triples(Tenant("alice", "kb"), [edge("ada", "admires", "dora")])
        assert await reader.adjacent(Tenant("alice", "kb"), [iri("dora")], 30) == [(iri("dora"), iri("eve"))]
        await writer.delete_collection(Tenant("alice", "kb"))
        assert await reader.adjacent(Tenant("alice", "kb"), [iri("dora"), iri("ada")], 30) == []
        await reader.add_triples(Tenant("alice", "kb"), [edge("ada", "knows", "bob")])  # its own write
        assert await reader.adjacent(Tenant("alice", "kb"), [iri("ada")], 30) == [(iri("ada"), iri("bob"))]
    finally:
        await reader.db.close()
        await writer.db.close()


async def test_the_held_search_finds_what_the_search_level_by_level_finds(tmp_path: Path) -> None:
    """Random graphs (literals, labels, several relations), sources, targets, limits and frontier
    caps: the store's own search over its held arrays = `shortest_distances` over its adjacency
    reads (hops of the targets, levels searched, truncation)."""
    rng = np.random.default_rng(11)
    seen: set[str] = set()
    for case in range(60):
        store = SqliteTripleStore(tmp_path / f"graph{case}.db")
        try:
            n = int(rng.integers(5, 40))
            triples = [edge(f"n{rng.integers(n)}", f"r{rng.integers(3)}", f"n{rng.integers(n)}") for _ in range(n * 2)]
            triples += [Triple(s=Term.iri(iri(f"n{i}")), p=Term.iri(iri("r1")), o=Term.literal(f"v{i}"))
                        for i in range(0, n, 3)]  # fmt: skip
            await store.add_triples(Tenant("alice", "kb"), triples)
            names = [iri(f"n{i}") for i in range(n + 3)]  # three entities the graph does not hold
            search = DistanceSearch(
                sources=rng.choice(names, int(rng.integers(1, 4))).tolist(),
                targets=[rng.choice(names, int(rng.integers(0, 4))).tolist() for _ in range(int(rng.integers(1, 8)))],
                max_distance=int(rng.integers(1, 5)),
                per_entity=int(rng.integers(1, 4)),
                max_frontier=int(rng.integers(1, 12)),
            )
            held = await store.distances(Tenant("alice", "kb"), search)
            read = partial(store.adjacent, Tenant("alice", "kb"), limit_per_entity=search.per_entity)
            by_level = await shortest_distances(
                read, search.sources, search.targets, search.max_distance, search.max_frontier
            )
            wanted = {e for g in search.targets for e in g}
            assert held is not None
            assert held.hops == {e: h for e, h in by_level.hops.items() if e in wanted}, (case, search)
            assert (held.levels, held.truncated) == (by_level.levels, by_level.truncated), case
            seen.update({"truncated"} if held.truncated else set(), {f"hop {h}" for h in held.hops.values()})
        finally:
            await store.db.close()
    assert {"truncated", "hop 0", "hop 1", "hop 2", "hop 3"} <= seen  # the cases reach what they test


async def test_a_search_over_a_collection_with_no_edges_finds_nothing(tmp_path: Path) -> None:
    """A collection holding no edge (empty, or labels only): the reranker's distance search asks
    anyway, and gets the sources at hop 0 and nothing else, never an error."""
    store = SqliteTripleStore(tmp_path / "graph.db")
    try:
        await store.add_triples(Tenant("alice", "labels-only"), [Triple(s=Term.iri(iri("ada")), p=Term.iri(RDFS_LABEL),
                                                                o=Term.literal("Ada"))])  # fmt: skip
        search = DistanceSearch([iri("ada")], [[iri("bob")], [iri("ada"), iri("carl")], []], 3, 30, 100)
        for coll in ("empty", "labels-only"):
            found = await store.distances(Tenant("alice", coll), search)
            assert found is not None and found.hops == {iri("ada"): 0}, coll
    finally:
        await store.db.close()

"""The classic baseline is faithful: 3 store queries per entity per level, 1 per distinct label,
a fresh cache per request, every call counted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from bench.graph.classic import ClassicLimits, ClassicQuery, classic_retrieve
from processors.stores.protocol import EntityHit
from processors.stores.sqlite.triples import SqliteTripleStore
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple

E = "http://x/e/"
U, C = "u", "c"


class CountingStore(SqliteTripleStore):
    """The real SQLite store, counting pattern() calls independently of the baseline's own counters."""

    calls: list[tuple[str | None, str | None, str | None]]

    async def pattern(self, tenant, s, p, o, limit):  # type: ignore[no-untyped-def]
        self.calls.append((s and s.value, p and p.value, o and o.value))
        return await super().pattern(tenant, s, p, o, limit)


def _t(s: str, p: str, o: str, literal: bool = False) -> Triple:
    return Triple(
        s=Term.iri(E + s),
        p=Term.iri(p if p == RDFS_LABEL else E + p),
        o=Term.literal(o) if literal else Term.iri(E + o),
    )


@pytest.fixture
async def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    st = CountingStore(tmp_path / "g.db")
    st.calls = []
    # a -r-> b -r-> c; labels for a, b and r only (c has none).
    await st.add_triples(
        Tenant(U, C),
        [
            _t("a", "r", "b"),
            _t("b", "r", "c"),
            _t("a", RDFS_LABEL, "Alpha", literal=True),
            _t("b", RDFS_LABEL, "Beta", literal=True),
            _t("r", RDFS_LABEL, "rel", literal=True),
        ],
    )
    yield st
    await st.close()


async def test_one_level_is_three_queries_for_the_seed_plus_one_per_label(store: CountingStore) -> None:
    q = ClassicQuery(store, U, C, ClassicLimits(max_path_length=1))
    triples = await q.get_labelgraph([E + "a"])
    traversal = [(E + "a", None, None), (None, E + "a", None), (None, None, E + "a")]
    assert store.calls[:3] == traversal
    # labels: a, r, b, each fetched alone (s=iri, p=rdfs:label)
    assert sorted(store.calls[3:]) == sorted([(E + x, RDFS_LABEL, None) for x in ("a", "r", "b")])
    assert (q.traversal_calls, q.label_calls) == (3, 3)
    assert triples == [("Alpha", "rel", "Beta")]


async def test_two_levels_recurse_into_every_subject_and_object_without_a_visited_set(store: CountingStore) -> None:
    q = ClassicQuery(store, U, C, ClassicLimits(max_path_length=2))
    triples = await q.get_labelgraph([E + "a"])
    # level 1: a (3 queries). level 2: b (object of a r b) and the literal "Alpha" (object of a's
    # label triple) — 3 queries each: 9 traversal calls.
    assert q.traversal_calls == 9
    entities_queried = [next(x for x in call if x is not None) for call in store.calls[:9]]
    assert entities_queried.count(E + "a") == 3 and entities_queried.count(E + "b") == 3
    assert entities_queried.count("Alpha") == 3  # the literal followed as if it were an IRI
    # labels: a, r, b, c (c has none: still one call)
    assert q.label_calls == 4 and len(store.calls) == 13
    assert sorted(triples) == [("Alpha", "rel", "Beta"), ("Beta", "rel", E + "c")]


async def test_each_request_starts_with_an_empty_label_cache(store: CountingStore) -> None:
    class Index:
        async def search(self, tenant: Tenant, vector, text, limit) -> list[EntityHit]:  # type: ignore[no-untyped-def]
            return [EntityHit(E + "a", "Alpha", 1.0, lexical=True)]

    class Embedder:
        model = "fake"

        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            return [[1.0] for _ in texts]

    first = await classic_retrieve(store, Index(), Embedder(), U, C, "alpha?", ClassicLimits(max_path_length=1))  # type: ignore[arg-type]
    second = await classic_retrieve(store, Index(), Embedder(), U, C, "alpha?", ClassicLimits(max_path_length=1))  # type: ignore[arg-type]
    assert first.label_calls == second.label_calls == 3  # nothing carried over between requests
    assert first.store_calls == second.store_calls == 1 + 3 + 3  # entity search + traversal + labels
    assert len(store.calls) == 2 * 6


async def test_size_check_only_at_entry_so_seeds_after_a_full_subgraph_cost_nothing(store: CountingStore) -> None:
    q = ClassicQuery(store, U, C, ClassicLimits(max_path_length=1, max_subgraph_size=1))
    await q.get_subgraph([E + "a", E + "b"])
    assert q.traversal_calls == 3  # a's three queries overfill the subgraph; b is never queried

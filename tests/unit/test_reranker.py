"""The reranker's algorithm over fake sources: each strategy's ordering where the right answer is
known (a 3-hop distance Graphiti would call infinite), one store round trip per BFS level,
weight validation, stable ties, the fallback with no question entities, and the fusion formula."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest
from pydantic import ValidationError

from processors.accounting.usage import count, counting, current
from processors.algorithms.bfs import Distances, DistanceSearch, shortest_distances
from processors.base.errors import BadRequest
from processors.base.wire import error_response, parse_request
from processors.retrieval.reranker.rerank import NO_ENTITIES, NO_QUESTION_ENTITIES, Reranker, RerankerSettings
from processors.retrieval.reranker.signals import distance_score, question_entities
from schemas.graph_rag import SeedEntity
from schemas.reranker import RerankItem, RerankRequest, RerankResponse, RerankWeights
from schemas.tenant import Tenant

# Q - A - B - C is a chain (C is 3 hops from Q); Y - Z is elsewhere.
EDGES = [("Q", "A"), ("B", "A"), ("B", "C"), ("Y", "Z")]
NOW = datetime(2026, 1, 31, tzinfo=UTC)


def unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(8)
    return (v / np.linalg.norm(v)).tolist()


class Fake:
    """RerankSources over in-memory data; records every call, and counts each call a store
    service would make as one store request and round trip of the request being served."""

    def __init__(self, seeds: list[SeedEntity] | None = None) -> None:
        self.seed_list = seeds if seeds is not None else [SeedEntity(id="Q", label="q", score=1.0, lexical=True)]
        self.mentions = {"c1": ["C"], "c2": ["A", "Z"], "c3": []}
        self.episode_counts = {"A": 1, "C": 4, "Z": 2}
        self.chunk_vectors: dict[str, list[float]] = {}
        self.entity_vectors: dict[str, list[float]] = {}
        self.text_vectors: dict[str, list[float]] = {}
        self.calls: list[tuple[str, object]] = []

    async def embed(self, text: str) -> list[float]:
        self.calls.append(("embed", text))
        return unit(0)

    async def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("embed_texts", list(texts)))
        return [self.text_vectors[t] for t in texts]

    async def seeds(self, t: Tenant, vector: list[float], text: str, limit: int) -> list[SeedEntity]:
        self.calls.append(("seeds", text))
        count(current(), 1, 1)
        return self.seed_list

    async def episodes(
        self, t: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], window: tuple[datetime, datetime] | None
    ) -> tuple[dict[str, list[str]], dict[str, int]]:
        self.calls.append(("episodes", (list(entities), list(chunk_ids), window)))
        count(current(), 1, 1)
        found = {c: self.mentions[c] for c in chunk_ids if c in self.mentions}
        wanted = set(entities) | {e for es in found.values() for e in es}
        return found, {e: n for e, n in self.episode_counts.items() if e in wanted} if window else {}

    async def distances(self, t: Tenant, search: DistanceSearch) -> Distances:
        async def level(entities: list[str]) -> list[tuple[str, str]]:
            self.calls.append(("edges", list(entities)))  # one store round trip
            count(current(), 1, 1)
            return [(s, o) for s, o in EDGES if s in entities or o in entities]

        return await shortest_distances(level, search.sources, search.targets, search.max_distance,
                                        search.max_frontier)  # fmt: skip

    async def entity_similarities(self, t: Tenant, vector: list[float], iris: Sequence[str]) -> dict[str, float]:
        self.calls.append(("entity_sims", list(iris)))
        count(current(), 1, 1)
        return {i: float(np.dot(vector, self.entity_vectors[i])) for i in iris if i in self.entity_vectors}

    async def chunk_similarities(self, t: Tenant, vector: list[float], ids: Sequence[str]) -> dict[str, float]:
        self.calls.append(("chunk_sims", list(ids)))
        count(current(), 1, 1)
        return {i: float(np.dot(vector, self.chunk_vectors[i])) for i in ids if i in self.chunk_vectors}

    def count(self, name: str) -> int:
        return sum(1 for c, _ in self.calls if c == name)


def req(results: list[RerankItem], **kw: object) -> RerankRequest:
    return RerankRequest(user="u", collection="c", query="where is q?", results=results, as_of=NOW, **kw)  # type: ignore[arg-type]


def entities(*pairs: tuple[str, float]) -> list[RerankItem]:
    return [RerankItem(id=i, kind="entity", score=s) for i, s in pairs]


async def run(fake: Fake, request: RerankRequest, **settings: object) -> RerankResponse:
    with counting():  # as the framework counts each request it serves
        return await Reranker(fake, RerankerSettings(**settings)).run(request)  # type: ignore[arg-type]


async def test_distance_ranks_closer_entities_first_including_three_hops() -> None:
    fake = Fake()
    only_distance = RerankWeights(original=0.0, episode=0.0, distance=1.0)
    res = await run(fake, req(entities(("C", 0.9), ("Y", 0.8), ("A", 0.1)), strategy="distance", weights=only_distance))
    assert [r.id for r in res.results] == ["A", "C", "Y"]
    by_id = {r.id: r.graph_context for r in res.results}
    assert (by_id["A"].min_distance, by_id["C"].min_distance, by_id["Y"].min_distance) == (1, 3, None)
    assert by_id["C"].distance_score == pytest.approx(0.25)  # Graphiti's one-hop distance would give C nothing
    assert by_id["Y"].distance_score == 0.0 and by_id["C"].nearest_entity == "C"
    assert res.question_entities == ["Q"]
    # one seed search, then one round trip per BFS level for the whole frontier: <= max-distance + 1
    assert fake.count("seeds") == 1 and fake.count("edges") == 3
    assert res.stats is not None and res.stats.store_round_trips == 4
    assert res.stats.stage_store_round_trips == {"embed": 0, "lookup": 1, "distance": 3, "score": 0}
    assert fake.calls[-1] == ("edges", ["B"])
    # default weights: original·0.4 + distance·0.6, original min-max normalised (C 1, Y 0.875, A 0)
    res = await run(Fake(), req(entities(("C", 0.9), ("Y", 0.8), ("A", 0.1)), strategy="distance"))
    assert {r.id: round(r.combined_score, 6) for r in res.results} == {"C": 0.55, "Y": 0.35, "A": 0.3}


async def test_bfs_stops_once_every_result_entity_is_reached() -> None:
    fake = Fake()
    res = await run(fake, req(entities(("A", 0.5)), strategy="distance", question_entities=["Q"]))
    assert res.results[0].graph_context.min_distance == 1
    assert fake.count("edges") == 1 and fake.count("seeds") == 0  # given question entities: no search
    assert res.stats is not None and res.stats.store_round_trips == 1


async def test_max_distance_cuts_the_search() -> None:
    fake = Fake()
    res = await run(fake, req(entities(("C", 0.9), ("A", 0.1)), strategy="distance", max_distance=2))
    assert {r.id: r.graph_context.min_distance for r in res.results} == {"A": 1, "C": None}
    assert fake.count("edges") == 2


async def test_shortest_distances_reads_each_level_once() -> None:
    seen: list[list[str]] = []

    async def read(frontier: list[str]) -> list[tuple[str, str]]:
        seen.append(frontier)
        return [(s, o) for s, o in EDGES if s in frontier or o in frontier]

    d = await shortest_distances(read, ["Q", "Y"], [["C"], ["Z"]], 5, 100)
    assert d.hops == {"Q": 0, "Y": 0, "A": 1, "Z": 1, "B": 2, "C": 3} and d.levels == 3
    assert seen == [["Q", "Y"], ["A", "Z"], ["B"]]
    cut = await shortest_distances(read, ["Q", "Y"], [["C"]], 5, 1)
    assert cut.truncated and "Z" not in cut.hops
    # a result is resolved by its nearest entity: once every result has one, the search stops
    seen.clear()
    early = await shortest_distances(read, ["Q"], [["C", "A"], ["A"]], 5, 100)
    assert early.levels == 1 and early.hops["A"] == 1 and "C" not in early.hops


async def test_the_last_level_reads_the_fewer_side() -> None:
    hub = [("Q", "A")] + [("A", f"B{i}") for i in range(5)] + [("B3", "C")]
    seen: list[list[str]] = []

    async def read(ask: list[str]) -> list[tuple[str, str]]:
        seen.append(ask)
        return [(s, o) for s, o in hub if s in ask or o in ask]

    d = await shortest_distances(read, ["Q"], [["C"], ["X"]], 3, 100)
    assert seen == [["Q"], ["A"], ["C", "X"]]  # 2 unresolved entities rather than a frontier of 5
    assert d.hops["C"] == 3 and "X" not in d.hops and d.levels == 3
    seen.clear()
    assert (await shortest_distances(read, ["Q"], [["C"]], 2, 100)).hops.get("C") is None


async def test_episode_ranks_entities_mentioned_in_more_episodes_first() -> None:
    fake = Fake()
    items = [*entities(("A", 0.9)), RerankItem(id="c1", kind="chunk", score=0.5), RerankItem(id="c2", kind="chunk")]
    res = await run(fake, req(items, strategy="episode"))
    assert [r.id for r in res.results] == ["c1", "A", "c2"]
    ctx = {r.id: r.graph_context for r in res.results}
    assert (ctx["c1"].episode_mentions, ctx["c1"].episode_score) == (4, 1.0)  # normalised by the largest count
    assert (ctx["c2"].episode_mentions, ctx["c2"].episode_score) == (2, 0.5)  # its best entity (Z)
    assert ctx["A"].episode_score == 0.25
    # one documents call for every chunk's mentions and every entity's episodes, window ending at as_of
    assert fake.count("episodes") == 1
    (_, (ents, chunks, (since, until))) = next(c for c in fake.calls if c[0] == "episodes")
    assert ents == ["A"] and chunks == ["c1", "c2"] and until == NOW and (until - since).days == 30
    assert res.stats is not None and res.stats.store_round_trips == 1


async def test_a_window_before_year_one_starts_at_year_one() -> None:
    fake = Fake()
    first = datetime(1, 1, 1, tzinfo=UTC)
    for as_of in (datetime(1, 1, 1), datetime(1, 1, 20, tzinfo=UTC)):
        res = await run(
            fake, req(entities(("A", 0.9), ("C", 0.1)), strategy="episode").model_copy(update={"as_of": as_of})
        )
        assert [r.id for r in res.results] == ["C", "A"]
    windows = [c[1][2] for c in fake.calls if c[0] == "episodes"]
    assert windows == [(first, first), (first, datetime(1, 1, 20, tzinfo=UTC))]


async def test_hybrid_formula_and_graph_context() -> None:
    fake = Fake()
    w = RerankWeights(original=0.5, episode=0.2, distance=0.3)
    res = await run(fake, req(entities(("C", 1.0), ("A", 0.0), ("Z", 0.5)), strategy="hybrid", weights=w))
    got = {r.id: r for r in res.results}
    # original min-max normalised: C 1, A 0, Z 0.5; episodes /4: C 1, A .25, Z .5; distance: C .25, A .5, Z 0
    assert got["C"].combined_score == pytest.approx(0.5 * 1 + 0.2 * 1 + 0.3 * 0.25)
    assert got["A"].combined_score == pytest.approx(0.5 * 0 + 0.2 * 0.25 + 0.3 * 0.5)
    assert got["Z"].combined_score == pytest.approx(0.5 * 0.5 + 0.2 * 0.5 + 0.3 * 0)
    assert got["A"].graph_score == pytest.approx((0.2 * 0.25 + 0.3 * 0.5) / 0.5)
    assert [r.id for r in res.results] == ["C", "Z", "A"]
    assert got["C"].original_score == 1.0 and got["C"].graph_context.episode_mentions == 4


async def test_ties_keep_the_input_order() -> None:
    fake = Fake(seeds=[SeedEntity(id="Q", label="q", score=1.0, lexical=True)])
    items = entities(("Y", 0.3), ("Z", 0.3), ("X", 0.3), ("W", 0.3))  # Y/Z: no episodes, no path to Q
    fake.episode_counts = {}
    for strategy in ("distance", "episode", "hybrid"):
        res = await run(fake, req(items, strategy=strategy))
        assert [r.id for r in res.results] == ["Y", "Z", "X", "W"], strategy
        assert [r.index for r in res.results] == [0, 1, 2, 3]


async def test_no_question_entities_keeps_original_scores_and_says_why() -> None:
    weak = [SeedEntity(id="A", label="a", score=0.2), SeedEntity(id="C", label="c", score=0.1)]
    for strategy in ("distance", "hybrid"):
        fake = Fake(seeds=weak)
        res = await run(fake, req(entities(("C", 0.2), ("A", 0.9), ("Y", 0.5)), strategy=strategy))
        assert [r.id for r in res.results] == ["A", "Y", "C"]
        assert [r.combined_score for r in res.results] == [0.9, 0.5, 0.2]
        assert all(r.graph_context.note == NO_QUESTION_ENTITIES for r in res.results)
        assert res.question_entities == [] and fake.count("edges") == 0


def test_question_entities_named_first_else_similar_enough() -> None:
    named = [
        SeedEntity(id="curie", label="Marie Curie", score=1.0, lexical=True),
        SeedEntity(id="marie", label="Marie", score=1.0, lexical=True),
        SeedEntity(id="near", label="Pierre", score=0.9),
    ]
    assert question_entities(named, 3, 0.5) == ["curie"]  # "marie" is inside the longer name
    near = [SeedEntity(id=f"e{i}", label=f"e{i}", score=s) for i, s in enumerate((0.4, 0.8, 0.6, 0.7, 0.55))]
    assert question_entities(near, 3, 0.5) == ["e1", "e3", "e2"]
    assert question_entities(near, 3, 0.9) == []


async def test_semantic_uses_stored_vectors_and_embeds_only_what_has_none() -> None:
    fake = Fake()
    q = unit(0)
    fake.chunk_vectors = {"c1": unit(5), "c2": q}
    fake.entity_vectors = {"A": unit(6), "B": q}
    fake.text_vectors = {"free text": q}
    items = [
        RerankItem(id="c1", kind="chunk", score=0.9),
        RerankItem(id="c2", kind="chunk", score=0.1),
        RerankItem(id="A", kind="entity", score=0.8),
        RerankItem(id="t1", kind="triple", score=0.7, entity_ids=["B", "B"], text="ignored: B has a vector"),
        RerankItem(id="t2", kind="triple", score=0.0, entity_ids=["nobody"], text="free text"),
        RerankItem(id="t3", kind="triple", score=0.5),
    ]
    res = await run(fake, req(items, strategy="semantic", vector=q))
    sem = {r.id: r.graph_context.semantic_score for r in res.results}
    assert sem["c2"] == pytest.approx(1.0) and sem["t1"] == pytest.approx(1.0) and sem["t2"] == pytest.approx(1.0)
    assert sem["c1"] == pytest.approx(max(0.0, float(np.dot(q, unit(5)))), abs=1e-6)
    assert sem["t3"] is None and res.results[-1].graph_context.note is not None
    assert fake.calls.count(("embed_texts", ["free text"])) == 1 and fake.count("embed") == 0
    assert res.results[0].id in {"c2", "t1"}  # semantic 1.0 wins over a higher original score


async def test_a_result_without_entities_says_so() -> None:
    fake = Fake()
    res = await run(fake, req([RerankItem(id="c3", kind="chunk", score=1.0)], strategy="hybrid"))
    assert res.results[0].graph_context.note == NO_ENTITIES


def test_weights_must_sum_to_one() -> None:
    assert RerankWeights().original == 0.4
    RerankWeights(original=0.2, episode=0.3, distance=0.5)
    RerankWeights(original=0.1, episode=0.2, distance=0.7 + 5e-7)  # within 1e-6
    with pytest.raises(ValidationError, match="weights original=0.5, episode=0.3, distance=0.3 sum to 1.1"):
        RerankWeights(original=0.5, episode=0.3, distance=0.3)
    raw = b'{"user":"u","collection":"c","query":"q","results":[],"weights":{"original":0.9}}'
    with pytest.raises(BadRequest) as e:
        parse_request(RerankRequest, raw)
    err = error_response(RerankResponse, e.value).error
    assert err is not None and err.type == "bad-request"
    assert "weights" in err.message and "original=0.9, episode=0.3, distance=0.3" in err.message


def test_distance_score_is_inverse_hops() -> None:
    assert [distance_score(d) for d in (0, 1, 3, None)] == [1.0, 0.5, 0.25, 0.0]


async def test_request_overrides_the_flow_settings() -> None:
    s = RerankerSettings(strategy="episode", window_days=7)
    r = req([], strategy="distance", max_distance=5, weights=RerankWeights(original=1.0, episode=0, distance=0))
    got = s.for_request(r)
    assert (got.strategy, got.max_distance, got.window_days, got.weights.original) == ("distance", 5, 7, 1.0)
    assert isinstance(got.weights, RerankWeights)


async def test_each_result_gets_its_true_distance_on_random_graphs() -> None:
    """Against a plain breadth-first search over the whole graph: a result's nearest entity is at
    its true shortest distance when that is within max-distance, and unreached otherwise."""
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(4, 30))
        edges = [(f"n{rng.integers(n)}", f"n{rng.integers(n)}") for _ in range(int(rng.integers(n, 3 * n)))]
        sources = [f"n{i}" for i in rng.choice(n, int(rng.integers(1, 3)), replace=False)]
        groups = [[f"n{i}" for i in rng.choice(n, int(rng.integers(1, 4)))] for _ in range(int(rng.integers(1, 9)))]
        max_distance = int(rng.integers(1, 5))
        true = {e: 0 for e in sources}
        while True:  # plain BFS to a fixed point
            more = {b: true[a] + 1 for a, b in edges + [(o, s) for s, o in edges] if a in true and b not in true}
            if not more:
                break
            true.update({b: min(d, true.get(b, d)) for b, d in more.items()})

        async def read(frontier: list[str], edges: list[tuple[str, str]] = edges) -> list[tuple[str, str]]:
            return [(s, o) for s, o in edges if s in frontier or o in frontier]

        d = await shortest_distances(read, sources, groups, max_distance, 1000)
        for g in groups:
            want = min((true[e] for e in g if e in true), default=None)
            got = min((d.hops[e] for e in g if e in d.hops), default=None)
            assert got == (want if want is not None and want <= max_distance else None), (g, edges, sources)

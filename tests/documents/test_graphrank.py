"""graphrank (pure, over a fake store view): the bridge passage is found through the subject its
first passage names; the question's own concepts and hubs carry no hop (nor does what they
reach join the ranking); a second hop reaches a
chain's third passage; and the store is read a bounded number of times (candidates, named
concepts, one read per hop), never more."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from processors.algorithms.passage_rank import (
    Candidates,
    ConceptLinks,
    HopLinks,
    Passage,
    PassageRankParams,
    name_runs,
    question_phrases,
    rank_passages,
)

# c0 answers hop 1 and names "Rush"; c1's subject is Rush (the bridge) but it shares no words with
# the question; n0..n7 are noise that all mention the hub "music".
TEXTS = {"c0": "Nobody's Hero is a song by Rush from Counterparts.", "c1": "The band was formed in Toronto in 1968."}
TEXTS |= {f"n{i}": f"Unrelated passage {i} about music." for i in range(8)}
SUBJECTS = {"c1": "rush"}  # chunk -> the concept its document's title names
MENTIONS = {"c0": ["counterparts"]} | {f"n{i}": ["music"] for i in range(8)}
KEYS = {"rush": "rush", "music": "music", "counterparts": "counterparts"}


@dataclass
class FakeStore:
    """A PassageSource over dicts, answering as the stores do; it counts its reads."""

    dense: dict[str, float]
    texts: dict[str, str] = field(default_factory=lambda: dict(TEXTS))
    subjects: dict[str, str] = field(default_factory=lambda: dict(SUBJECTS))
    mentions: dict[str, list[str]] = field(default_factory=lambda: {k: list(v) for k, v in MENTIONS.items()})
    reads: list[str] = field(default_factory=list)
    skipped: list[set[str]] = field(default_factory=list)

    def chunks_of(self, concept: str) -> list[str]:
        return sorted(c for c in self.texts if concept in self.mentions.get(c, []) or self.subjects.get(c) == concept)

    async def candidates(self, terms: Sequence[str], k: int, phrases: Sequence[str] = ()) -> Candidates:
        self.reads.append("candidates")
        best = sorted(self.dense, key=lambda c: -self.dense[c])[:k]
        return Candidates([Passage(c, self.dense[c]) for c in best], len(self.texts), self.concepts(phrases))

    async def named(self, phrases: Sequence[str]) -> dict[str, tuple[str, list[Passage]]]:
        self.reads.append("named")
        return self.concepts(phrases)

    def concepts(self, phrases: Sequence[str]) -> dict[str, tuple[str, list[Passage]]]:
        by_key = {k: c for c, k in KEYS.items()}
        return {
            p: (by_key[p], [Passage(c, self.dense[c]) for c, s in self.subjects.items() if s == by_key[p]])
            for p in phrases
            if p in by_key
        }

    async def links(self, chunk_ids: Sequence[str], skip: set[str], cap: int, known: set[str]) -> HopLinks:
        self.reads.append("links")
        self.skipped.append(set(skip))
        hop = HopLinks()
        for c in chunk_ids:
            own = self.subjects.get(c)
            subjects = set(self.subjects.values())
            named = [KEYS_BY[r] for r in name_runs(self.texts[c]) if KEYS_BY.get(r) in subjects]
            hop.concepts_of[c] = [x for x in dict.fromkeys([*self.mentions.get(c, []), *named]) if x != own]
        for x in {x for cs in hop.concepts_of.values() for x in cs} - skip:
            chunks = self.chunks_of(x)
            subjects = [c for c, s in self.subjects.items() if s == x]
            hop.concepts[x] = ConceptLinks(min(len(chunks), cap + 1), subjects, chunks if len(chunks) <= cap else [])
        reached = {j for link in hop.concepts.values() for j in (*link.subjects, *link.chunks)} - known
        hop.passages = [Passage(j, self.dense[j]) for j in sorted(reached)]
        return hop


KEYS_BY = {k: c for c, k in KEYS.items()}


def dense(first: float, bridge: float) -> dict[str, float]:
    out = {c: 0.1 for c in TEXTS}
    out["c0"], out["c1"] = first, bridge
    return out


async def ranked(store: FakeStore, question: str, limit: int, p: PassageRankParams) -> list[str]:
    return [c for c, _ in await rank_passages(store, question, [], limit, p)]


async def test_the_bridge_passage_is_found_through_a_subject_its_first_passage_names() -> None:
    store = FakeStore(dense(0.9, 0.05))  # the bridge is the least similar chunk of all
    got = await ranked(store, "Which band released Counterparts?", 3, PassageRankParams(seeds=3, candidates=3))
    assert got[:2] == ["c0", "c1"]
    plain = await ranked(FakeStore(dense(0.9, 0.05)), "Which band released Counterparts?", 3,
                         PassageRankParams(seeds=3, candidates=3, w_title_link=0, w_concept_link=0))  # fmt: skip
    assert "c1" not in plain  # without the hop the bridge is not in the top 3


async def test_a_concept_the_question_names_boosts_its_subjects_and_carries_no_hop() -> None:
    store = FakeStore(dense(0.2, 0.2))
    assert "rush" in question_phrases("Where was Rush formed?")
    assert await ranked(store, "Where was Rush formed?", 1, PassageRankParams()) == ["c1"]
    store = FakeStore(dense(0.9, 0.05))
    store.mentions["c0"].append("rush")  # c0 now mentions Rush too, but the question names it
    got = await ranked(store, "Which song of Rush is on Counterparts?", 10, PassageRankParams(seeds=1, hops=1))
    assert got.index("c1") < got.index("n0")  # boosted as the named concept's subject
    assert store.skipped == [{"rush", "counterparts"}]  # the hop does not follow what the question names


async def test_a_hub_concept_carries_no_hop_and_its_chunks_are_not_read() -> None:
    store = FakeStore(dense(0.1, 0.1))
    store.dense["n0"] = 0.9  # the best seed mentions only the hub "music" (in 8 chunks)
    p = PassageRankParams(seeds=1, hops=1, max_concept_chunks=4)
    links = await store.links(["n0"], set(), 4, set())
    assert links.concepts["music"].df == 5 and links.concepts["music"].chunks == []  # read up to cap + 1
    got = await rank_passages(store, "passage", [], 10, p)
    masses = dict(got)
    assert all(masses[c] < 1e-8 for c in TEXTS if c != "n0")  # no mass left the seed through the hub


async def test_a_chunk_reached_only_through_a_hub_does_not_join_the_ranking() -> None:
    store = FakeStore(dense(0.1, 0.1))
    store.dense |= {"n0": 0.9, "m": 0.8}  # m is about the hub "music": near the question, not a candidate
    store.texts["m"] = "Music is an art."
    store.subjects["m"] = "music"
    links = await store.links(["n0"], set(), 4, {"n0"})
    assert links.concepts["music"].subjects == ["m"] and [x.id for x in links.passages] == ["m"]  # the store reached it
    got = dict(await rank_passages(store, "passage", [], 10, PassageRankParams(seeds=1, hops=1, candidates=1,
                                                                                max_concept_chunks=4)))  # fmt: skip
    assert "m" not in got  # the hub carries no hop, so nothing it reaches is ranked


async def test_a_second_hop_reaches_the_third_passage_of_a_chain() -> None:
    texts = {"a": "Alpha names Beta.", "b": "Beta is about Gamma.", "g": "Gamma holds the answer."}
    store = FakeStore({"a": 0.9, "b": 0.0, "g": 0.0}, texts, {"b": "beta", "g": "gamma"}, {})
    KEYS.update(beta="beta", gamma="gamma")
    KEYS_BY.update(beta="beta", gamma="gamma")
    try:
        one = await ranked(store, "q", 3, PassageRankParams(seeds=1, hops=1))
        two = await ranked(FakeStore({"a": 0.9, "b": 0.0, "g": 0.0}, texts, {"b": "beta", "g": "gamma"}, {}), "q", 3,
                           PassageRankParams(seeds=1, hops=2))  # fmt: skip
    finally:
        for k in ("beta", "gamma"):
            KEYS.pop(k)
            KEYS_BY.pop(k)
    assert one[:2] == ["a", "b"] and two[:3] == ["a", "b", "g"]
    scores = dict(await rank_passages(FakeStore({"a": 0.9, "b": 0.0, "g": 0.0}, texts, {}, {}), "q", [], 3,
                                      PassageRankParams(seeds=1, hops=2)))  # fmt: skip
    assert scores["g"] < 1e-8  # no links, no mass


async def test_the_store_is_read_once_for_candidates_and_names_and_once_per_hop() -> None:
    store = FakeStore(dense(0.9, 0.05))
    await ranked(store, "Which band released Counterparts?", 5, PassageRankParams(hops=2, seeds=1))
    assert store.reads == ["candidates", "links", "links"]
    store = FakeStore(dense(0.9, 0.05))
    await ranked(store, "Which band released Counterparts?", 5, PassageRankParams(hops=0))
    assert store.reads == ["candidates"]

"""Question decomposition without a model (processors/algorithms/hops), the hop-by-hop searches that
feed each hop's bridge into the next (processors/retrieval/lazy_rag/chain) and sentence-level
evidence links (algorithms/bridges, `best_sentences`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from processors.algorithms.bridges import bridges, fuse
from processors.algorithms.hops import decompose, hop_query, words
from processors.retrieval.lazy_rag.chain import HopRankings, follow_bridges, follow_hops
from schemas.documents import Chunk
from schemas.tenant import Tenant


def test_of_before_a_described_thing_starts_the_inner_hop() -> None:
    assert decompose("Who is the sibling of the performer of Decade?") == ["performer Decade", "sibling"]
    assert decompose("Of what church is the Diocese of the birthplace of Meehan Bonnar?") == [
        "birthplace Meehan Bonnar",
        "church Diocese",
    ]


def test_a_relative_clause_takes_the_noun_it_describes() -> None:
    assert decompose("What is the population of the state where Dodge City Regional Airport is located?") == [
        "state Dodge City Regional Airport located",
        "population state",
    ]
    assert decompose("What county shares a border with the county where Black Hawk Township is located?")[0] == (
        "county Black Hawk Township located"
    )


def test_of_inside_a_name_or_before_a_number_is_no_hop() -> None:
    assert decompose("Who is the wife of Kim Jong-chul?") == []
    assert decompose("Who wrote the Journal of Psychotherapy Integration?") == []
    assert decompose("Who passed the Judiciary Act of 1869?") == []
    assert decompose("What is the capital of France?") == []


def test_a_part_holding_only_its_head_noun_is_not_a_hop() -> None:
    # "of the actor" only names what the clause after it describes: two hops, not three.
    hops = decompose("What is the country of citizenship of the actor who plays John in Meet Me?")
    assert hops == ["actor plays John Meet Me", "country citizenship actor"]


def test_three_hops_innermost_first_and_words_keep_initials() -> None:
    hops = decompose("Who founded the company that made the car of the driver of Team Lotus?")
    assert hops == ["driver Team Lotus", "company made car", "founded company"]
    assert words('Who is "Hyman B. Samuels"?') == ["Who", "is", "Hyman", "B.", "Samuels"]
    assert hop_query("sibling", "Michael Jackson") == "Michael Jackson sibling"


def test_bridges_from_the_best_matching_sentence_only() -> None:
    passage = (
        "Decade is a compilation. It is an album recorded by Neil Young in Toronto. "
        "The cover was shot in London by Joel Bernstein."
    )
    question = "Who recorded the album Decade?"
    assert {b.name for b in bridges(question, passage, 5)} == {"Neil Young", "Toronto", "London", "Joel Bernstein"}
    # The second sentence holds "album" and "recorded" (the first only "Decade"): only its names lead on.
    assert [b.name for b in bridges(question, passage, 5, best_sentences=1)] == ["Neil Young", "Toronto"]


def test_fuse_adds_weighted_rankings() -> None:
    fused = fuse(["a", "b"], [], k=1.0, weight=1.0, decay=1.0, keep=0, weighted=[(3.0, ["c"])])
    assert [c for c, _ in fused] == ["c", "a", "b"]
    assert fused[0][1] == pytest.approx(3.0 / 2)


class FakeSearch:
    """Search over fixed chunks: a search returns the chunks whose text holds its last word."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = list(chunks)
        self.searched: list[list[str]] = []

    async def embed_texts(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        return [[float(len(t))] for t in texts]

    async def search_many(
        self, t: Tenant, searches: Sequence[tuple[list[float], str]], limit: int
    ) -> list[list[Chunk]]:
        self.searched.append([text for _, text in searches])
        return [[c for c in self.chunks if text.split()[-1] in c.text][:limit] for _, text in searches]


def _chunk(cid: str, text: str) -> Chunk:
    return Chunk(id=cid, document_id=cid, text=text)


def test_each_hop_searches_with_the_bridge_the_previous_hop_found() -> None:
    src = FakeSearch([
        _chunk("p", "Decade is an album recorded by Neil Young."),
        _chunk("s", "Neil Young has a sibling, Bob Young."),
        _chunk("x", "performer list"),
    ])  # fmt: skip
    out = asyncio.run(follow_hops(src, Tenant("u", "c"), "Who is the sibling of the performer of Decade?",  # type: ignore[arg-type]
                                  max_hops=2, seeds=1, per_seed=1, depth=5, weights=(0.5, 0.25)))  # fmt: skip
    assert src.searched == [["performer Decade"], ["Neil Young sibling"]]
    # Each hop's ranking with its weight: the first hop's, then the bridge-fed one's.
    assert out.rankings == [(0.5, ["p"]), (0.25, ["s"])]
    assert set(out.chunks) == {"p", "s"}


def test_hop_rankings_join_the_fusion_without_a_follow_up_round() -> None:
    src = FakeSearch([])
    hits = [_chunk("a", "a"), _chunk("b", "b")]
    hops = HopRankings([(5.0, ["c"])], {"c": _chunk("c", "c")})
    fused = asyncio.run(follow_bridges(src, Tenant("u", "c"), "q", hits, 0, 4, 5, hops))  # type: ignore[arg-type]
    assert [c.id for c in fused] == ["a", "c", "b"]  # the first stays first; c's hop ranking lifts it
    assert src.searched == []  # no bridge seeds: no follow-up search


def test_the_next_hop_follows_the_names_of_the_best_seeds_chunks_of_a_hop() -> None:
    src = FakeSearch([
        _chunk("p", "Decade is by Neil Young."),
        _chunk("q", "Decade was produced by David Briggs."),
        _chunk("s", "Neil Young has a sibling."),
    ])  # fmt: skip
    question = "Who is the sibling of the performer of Decade?"
    asyncio.run(follow_hops(src, Tenant("u", "c"), question, 2, 2, 1, 5, (0.5, 0.25)))  # type: ignore[arg-type]
    # Both chunks the first hop found lead on (seeds 2), each by its own name.
    assert src.searched[1] == ["Neil Young sibling", "David Briggs sibling"]
    src.searched.clear()
    asyncio.run(follow_hops(src, Tenant("u", "c"), question, 2, 1, 1, 5, (0.5, 0.25)))  # type: ignore[arg-type]
    assert src.searched[1] == ["Neil Young sibling"]


def test_the_follow_up_round_can_ask_the_next_hop_instead_of_the_residual() -> None:
    question = "Who is the sibling of the performer of Decade?"
    hits = [_chunk("p", "Decade is an album recorded by Neil Young.")]
    residual = FakeSearch([])
    asyncio.run(follow_bridges(residual, Tenant("u", "c"), question, hits, 1, 1, 5))  # type: ignore[arg-type]
    assert residual.searched == [["Neil Young sibling performer"]]  # what no passage holds yet
    next_hop = FakeSearch([])
    asyncio.run(follow_bridges(next_hop, Tenant("u", "c"), question, hits, 1, 1, 5, next_hop="sibling"))  # type: ignore[arg-type]
    assert next_hop.searched == [["Neil Young sibling"]]


def test_a_bridge_two_seeds_name_is_searched_once_and_ranks_for_both() -> None:
    question = "Who is the sibling of the performer of Decade?"
    hits = [_chunk("p", "Decade is an album recorded by Neil Young."), _chunk("q", "Decade: Neil Young, 1977.")]
    src = FakeSearch([_chunk("s", "Neil Young has a sibling, performer Bob Young.")])
    fused = asyncio.run(follow_bridges(src, Tenant("u", "c"), question, hits, 2, 1, 5))  # type: ignore[arg-type]
    assert src.searched == [["Neil Young sibling performer"]]  # both seeds name Neil Young: one search
    alone = FakeSearch(src.chunks)
    one_seed = asyncio.run(follow_bridges(alone, Tenant("u", "c"), question, hits, 1, 1, 5))  # type: ignore[arg-type]
    # the second seed's follow-up still counts in the fusion: s scores higher with both seeds
    assert dict((c.id, c.score) for c in fused)["s"] > dict((c.id, c.score) for c in one_seed)["s"]

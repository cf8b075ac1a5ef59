"""graphrank (pure): the bridge passage is found through the title its first passage names; the
question's own concepts and hubs carry no hop; a scope restricts statistics, seeds and hops."""

from __future__ import annotations

import numpy as np
import pytest

from processors.algorithms.passage_rank import PassageRankParams, build_concepts, rank

# a NaN mass (a division by a zero link weight) would rank arbitrarily: numpy's warning fails the test
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

# chunk 0 answers hop 1 and names "Rush"; chunk 1 is titled "Rush" (the bridge) but shares no
# words with the question; chunks 2..9 are noise that all mention the hub "music".
TEXTS = ["Nobody's Hero is a song by Rush from Counterparts.", "The band was formed in Toronto in 1968."] + [
    f"Unrelated passage {i} about music." for i in range(8)
]
TITLES = ["nobody's hero", "rush"] + [None] * 8
KEYS = {"nobody's hero": "nobody s hero", "rush": "rush", "music": "music", "counterparts": "counterparts"}
MENTIONS = [(0, "counterparts")] + [(i, "music") for i in range(2, 10)]


def scores(first: float, bridge: float) -> np.ndarray:
    dense = np.full(10, 0.1)
    dense[0], dense[1] = first, bridge
    return dense


def test_the_bridge_passage_is_found_through_a_title_its_first_passage_names() -> None:
    concepts = build_concepts(TEXTS, TITLES, MENTIONS, KEYS)
    assert concepts.named_in("Which band released Counterparts?") == [concepts.by_key["counterparts"]]
    dense = scores(0.9, 0.05)  # the bridge is the least similar chunk of all
    rows, mass = rank(concepts.graph, dense, np.zeros(10), concepts.named_in("Which band released Counterparts?"),
                      3, PassageRankParams(seeds=3))  # fmt: skip
    assert rows.tolist()[:2] == [0, 1] and mass[1] > 0  # the bridge holds what its seed passed on
    plain, _ = rank(
        concepts.graph, dense, np.zeros(10), [], 3, PassageRankParams(seeds=3, w_title_link=0, w_concept_link=0)
    )
    assert 1 not in plain.tolist()  # without the hop the bridge is not in the top 3


def test_a_concept_the_question_names_boosts_the_chunks_it_titles() -> None:
    concepts = build_concepts(TEXTS, TITLES, MENTIONS, KEYS)
    named = concepts.named_in("Where was Rush formed?")
    assert named == [concepts.by_key["rush"]]
    rows, _ = rank(concepts.graph, scores(0.2, 0.2), np.zeros(10), named, 1, PassageRankParams())
    assert rows.tolist() == [1]


def test_a_scope_restricts_seeds_and_hops() -> None:
    concepts = build_concepts(TEXTS, TITLES, MENTIONS, KEYS)
    mask = np.array([True] + [False] + [True] * 8)
    rows, _ = rank(concepts.graph, scores(0.9, 0.05), np.zeros(10), [], 10, PassageRankParams(seeds=3), mask)
    assert 1 not in rows.tolist() and set(rows.tolist()) <= set(np.flatnonzero(mask).tolist())


def test_a_scope_ranks_as_a_collection_of_only_its_chunks() -> None:
    """Statistics, title mentions and the question's concepts are the scope's: masked ranking over
    the whole graph equals ranking a graph built from the scope's chunks alone."""
    rng = np.random.default_rng(5)
    names = ["rush", "toronto", "neil peart", "counterparts", "music", "canada"]
    texts, titles, mentions = [], [], []
    for row in range(24):
        picked = rng.choice(names, 3, replace=False).tolist()
        texts.append(f"A passage naming {picked[0]} and {picked[1]}.")
        titles.append(picked[2] if row % 2 else None)
        mentions += [(row, n) for n in rng.choice(names, 2, replace=False).tolist()]
    keys = {n: n for n in names}
    dense, lexical = rng.random(24), rng.random(24)
    question = "Which band from Toronto released Counterparts with Neil Peart?"
    full = build_concepts(texts, titles, mentions, keys)
    for seed in range(6):
        rows = np.sort(np.random.default_rng(seed).choice(24, 12, replace=False))
        mask = np.zeros(24, bool)
        mask[rows] = True
        at = {int(r): k for k, r in enumerate(rows)}
        alone = build_concepts([texts[r] for r in rows], [titles[r] for r in rows],
                               [(at[r], e) for r, e in mentions if r in at], keys)  # fmt: skip
        p = PassageRankParams(seeds=4, max_df=0.5)
        got, got_mass = rank(full.graph, dense, lexical, full.named_in(question, mask), 8, p, mask)
        want, want_mass = rank(alone.graph, dense[rows], lexical[rows], alone.named_in(question), 8, p)
        assert rows[want].tolist() == got.tolist(), seed
        assert got_mass == pytest.approx(want_mass)


def test_a_second_hop_reaches_the_third_passage_of_a_chain() -> None:
    """Counterparts -> Rush (titled, names Neil Peart) -> Neil Peart (titled): the last passage
    shares no word with the question and is reached only through the passage the first hop found."""
    texts = [*TEXTS[:2], "The drummer Neil Peart joined in 1974.", "He was born in Hamilton, Ontario."]
    texts += [f"Unrelated passage {i} about music." for i in range(8)]
    titles = [*TITLES[:2], None, "neil peart"] + [None] * 8
    keys = {**KEYS, "neil peart": "neil peart"}
    mentions = [(0, "counterparts"), (1, "neil peart")] + [(i, "music") for i in range(4, 12)]
    concepts = build_concepts(texts, titles, mentions, keys)
    named = concepts.named_in("Where was the drummer of the band that released Counterparts born?")
    dense = np.full(12, 0.1)
    dense[0] = 0.9
    dense[1] = dense[3] = 0.05  # the bridge and the answer are the least similar chunks of all
    one, _ = rank(concepts.graph, dense, np.zeros(12), named, 3, PassageRankParams(seeds=3, hops=1))
    two, mass = rank(concepts.graph, dense, np.zeros(12), named, 3, PassageRankParams(seeds=3, hops=2))
    assert 1 in one.tolist() and 3 not in one.tolist()
    assert {0, 1, 3} == set(two.tolist()) and mass[-1] > 0

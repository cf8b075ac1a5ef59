"""Community detection and profiles (pure)."""

from __future__ import annotations

import random

import pytest

from processors.ingest.communities.detect import CommunityParams, community_id, detect
from processors.ingest.communities.profiles import membership_hash, profile


def clustered_graph(groups: int = 6, size: int = 10, seed: int = 3) -> list[tuple[str, str, float]]:
    """Dense groups with a few edges between them."""
    rnd = random.Random(seed)
    edges = []
    for g in range(groups):
        nodes = [f"g{g}n{i}" for i in range(size)]
        edges += [(a, b, 1.0) for a in nodes for b in nodes if a < b and rnd.random() < 0.5]
    edges += [(f"g{g}n0", f"g{(g + 1) % groups}n1", 0.5) for g in range(groups)]
    return edges


def test_levels_form_a_tree_leaves_first() -> None:
    found = detect(clustered_graph(), CommunityParams(community_max_size=12))
    by_id = {c.id: c for c in found}
    leaves = [c for c in found if c.level == 0]
    assert len(leaves) == 6 and all(len(c.members) == 10 for c in leaves)  # one community per dense group
    assert max(c.level for c in found) >= 1
    for c in found:
        if c.parent is not None:
            parent = by_id[c.parent]
            assert parent.level == c.level + 1 and c.id in parent.children
            assert set(c.members) <= set(parent.members)
    top = max(c.level for c in found)
    assert sorted(m for c in found if c.level == top for m in c.members) == sorted(m for c in leaves for m in c.members)


def test_detection_is_deterministic_and_ids_follow_membership() -> None:
    a = detect(clustered_graph(), CommunityParams(community_max_size=12))
    b = detect(list(reversed(clustered_graph())), CommunityParams(community_max_size=12))
    assert [(c.id, c.members) for c in a] == [(c.id, c.members) for c in b]
    assert community_id(0, ["y", "x"]) == community_id(0, ["x", "y"]) != community_id(1, ["x", "y"])
    assert detect([], CommunityParams()) == [] and detect([("a", "a", 1.0)], CommunityParams()) == []


def test_profiles_rank_central_entities_and_representative_chunks() -> None:
    edges = clustered_graph(groups=2, size=6)
    found = detect(edges, CommunityParams(community_max_size=8))
    mentions = [(f"g0n{i}", "c0", 3) for i in range(6)] + [("g0n0", "c1", 1), ("g1n0", "c2", 2)]
    vectors = {"c0": [1.0, 0.0], "c1": [0.0, 1.0], "c2": [0.0, 1.0]}
    records = {r.id: r for r in profile(found, mentions, edges, vectors)}
    g0 = next(r for r in records.values() if r.level == 0 and "g0n0" in r.members)
    in_g0 = sum(f"g0n{i}" in g0.members for i in range(6))
    assert g0.top_chunks[0] == "c0" and g0.chunks == {"c0": 3.0 * in_g0, "c1": 1.0}
    assert g0.vector == pytest.approx([0.70710677, 0.70710677])  # the mean of its chunks' unit vectors
    assert g0.membership_hash == membership_hash(g0.members)
    for r in records.values():
        if r.children:
            assert set(r.chunks) == {c for k in r.children for c in records[k].chunks}

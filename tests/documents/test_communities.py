"""Community detection and profiles (pure), over the arrays a store returns."""

from __future__ import annotations

import random

import pytest

from processors.ingest.communities.detect import CommunityParams, community_id, detect
from processors.ingest.communities.profiles import membership_hash, profile
from processors.stores.community_graph import CommunityGraph


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
    found = detect(CommunityGraph.of(clustered_graph()), CommunityParams(community_max_size=12))
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
    a = detect(CommunityGraph.of(clustered_graph()), CommunityParams(community_max_size=12))
    b = detect(CommunityGraph.of(list(reversed(clustered_graph()))), CommunityParams(community_max_size=12))
    assert [(c.id, c.members) for c in a] == [(c.id, c.members) for c in b]
    assert community_id(0, ["y", "x"]) == community_id(0, ["x", "y"]) != community_id(1, ["x", "y"])
    assert detect(CommunityGraph.of([]), CommunityParams()) == []
    assert detect(CommunityGraph.of([("a", "a", 1.0)]), CommunityParams()) == []


def test_profiles_rank_central_entities_and_representative_chunks() -> None:
    edges = clustered_graph(groups=2, size=6)
    found = detect(CommunityGraph.of(edges), CommunityParams(community_max_size=8))
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


@pytest.mark.parametrize(("groups", "size", "max_size", "seed"), [(6, 10, 12, 3), (12, 8, 10, 1), (30, 15, 20, 4)])
def test_level_zero_is_what_the_tuple_path_found(groups: int, size: int, max_size: int, seed: int) -> None:
    """The arrays path (integer ids, networkit's Leiden) finds the level-0 communities that the
    previous path (string tuples, graspologic's hierarchical Leiden) found, ids included."""
    from graspologic_native import hierarchical_leiden

    edges = clustered_graph(groups, size, seed)
    found = hierarchical_leiden(edges, resolution=1.0, max_cluster_size=max_size, seed=7, use_modularity=True)
    before: dict[int, list[str]] = {}
    for c in found:
        if c.is_final_cluster:
            before.setdefault(c.cluster, []).append(c.node)
    arrays = detect(CommunityGraph.of(edges), CommunityParams(community_max_size=max_size))
    assert sorted(community_id(0, m) for m in before.values()) == sorted(c.id for c in arrays if c.level == 0)
    assert len(before) == groups


def test_a_cluster_above_the_size_is_split_again() -> None:
    rnd = random.Random(5)  # one dense group of 60 made of four looser groups of 15: split under 20
    nodes = [f"n{i}" for i in range(60)]
    edges = [(a, b, 1.0) for a in nodes for b in nodes if a < b and rnd.random() < 0.05]
    edges += [(a, b, 3.0) for a in nodes for b in nodes if a < b and int(a[1:]) // 15 == int(b[1:]) // 15]
    leaves = [c for c in detect(CommunityGraph.of(edges), CommunityParams(community_max_size=20)) if c.level == 0]
    assert max(len(c.members) for c in leaves) <= 20 and sum(len(c.members) for c in leaves) == 60


def test_communities_do_not_depend_on_the_order_the_store_reads_the_graph() -> None:
    # A graph without clean clusters: Leiden's moves depend on node numbering, so detection must
    # number nodes by name, not by the order rows arrive in (two stores of one corpus differ).
    rnd = random.Random(5)
    names = [f"n{i}" for i in range(120)]
    edges = list({(a, b, float(rnd.randint(1, 3))) for a in names for b in rnd.sample(names, 4) if a != b})
    params = CommunityParams(community_max_size=15)
    found = []
    for seed in range(4):
        rows = list(edges)
        random.Random(seed).shuffle(rows)
        found.append([(c.id, c.members) for c in detect(CommunityGraph.of(rows), params)])
    assert all(f == found[0] for f in found) and len(found[0]) > 3

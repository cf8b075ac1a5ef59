"""Incremental community update after a write (pure): re-cluster only what the write touched.

The rule. A write flags stale the communities of the concepts it mentions (`mark_stale`) and
records the concepts no community holds yet (pending). The touched concepts are the members of
the stale level-0 communities plus the pending ones. Leiden, with the build's size cap, runs over
the subgraph those concepts induce; its clusters replace the stale level-0 communities (new ids
from their members). Every other level-0 community keeps its id, members and cached summary.
Each new community takes as parent the level-1 community most of its members' old communities
had; a community of new concepts only takes the parent its heaviest edges lead to, else the one
most stale communities had. The levels above are not re-clustered: they keep their communities
and ids, and their members, chunks, profile and membership hash follow their children (their
cached summaries go).

The limits. Edges from touched concepts to untouched communities are not weighed again, so a
concept never moves into an untouched neighbour community, where a build might put it; the levels
above keep their partition, which drifts from the one a build would find as updates accumulate.
A full build (the loader asks for one after each load) puts both right. A write that touches a
hub's community re-clusters that whole community: the cost follows the communities touched
(at most `community_max_size` members each), not the collection.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from processors.ingest.communities.detect import CommunityParams, Hierarchy, hierarchy
from processors.ingest.communities.profiles import Profiles
from processors.stores.community_graph import Change, CommunityGraph, Stale


def recluster(stale: Stale, graph: CommunityGraph, params: CommunityParams) -> Change:
    """The change an update makes (see the module docstring); `graph` is the subgraph induced by
    `stale.touched()` (and those concepts' mentions)."""
    found = hierarchy(graph, params.model_copy(update={"community_levels": 1}))
    records = Profiles(found, graph).records(0, range(len(found.ids[0]))) if found.ids else []
    old_of = {m: cid for cid, ms in stale.communities.items() for m in ms}
    chains = {chain[0]: chain for chain in stale.ancestors.values() if chain}
    common = Counter(chain[0] for chain in stale.ancestors.values() if chain)
    node_parent = [_parent_of(old_of.get(x), stale.ancestors) for x in graph.names]
    ancestors: dict[str, list[str]] = {m: [] for m in stale.touched()}
    for c, r in enumerate(records):
        r.parent = _vote(found.members[0][c], node_parent, found, common)
        for m in r.members:
            ancestors[m] = chains.get(r.parent, []) if r.parent else []
    return Change(sorted(stale.communities), records, ancestors)


def _parent_of(community: str | None, ancestors: Mapping[str, list[str]]) -> str | None:
    chain = ancestors.get(community, []) if community else []
    return chain[0] if chain else None


def _vote(members: np.ndarray, node_parent: Sequence[str | None], found: Hierarchy, common: Counter[str]) -> str | None:
    """The parent most of these members' old communities had; else the one their heaviest edges
    lead to; else the one most stale communities had (None: there is no level above)."""
    votes: Counter[str] = Counter(p for p in (node_parent[m] for m in members.tolist()) if p)
    if not votes:
        e = found.edges
        mine = np.isin(e.src, members) | np.isin(e.dst, members)
        for a, b, w in zip(e.src[mine].tolist(), e.dst[mine].tolist(), e.weight[mine].tolist(), strict=True):
            for x in (a, b):
                if node_parent[x]:
                    votes[node_parent[x]] += w
    if not votes:
        votes = common
    return min(votes, key=lambda p: (-votes[p], p)) if votes else None

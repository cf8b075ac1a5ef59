"""How drift finds its context (bus-free): the primer's communities and sample chunks, and a
follow-up's chunks with their one-hop neighbourhood.

Primer: the communities nearest the question (+ HyDE) vector, the top level first (the
communities service falls back a level while fewer than k/2 match, and searches every level when
there is no hierarchy), then the best 1-3 chunks of each by vector + text — two round trips.
With no communities (not built yet) the best chunks of the scope stand in.

Follow-up: the best chunks among the target communities' chunks (vector + text), then their
neighbourhood: the entities they name, the relations touching those (nearest the follow-up), the
related entities' labels and the chunks that name the related entities — five round trips in
four levels.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from processors.retrieval.drift.settings import DriftSettings
from processors.retrieval.drift.sources import DriftSources
from schemas.communities import CommunityInfo
from schemas.documents import Chunk
from schemas.retrieval import RelationshipRef
from schemas.tenant import Tenant

NEIGHBOUR_PER_ENTITY = 3  # chunks read per related entity


@dataclass
class Primer:
    """The primer's material."""

    communities: list[CommunityInfo]
    samples: dict[str, list[Chunk]]  # community id -> its best chunks
    fallback: list[Chunk]  # no communities: the best chunks of the scope

    def chunks(self) -> list[Chunk]:
        """Every sample chunk once: the best of each community first, then the second best..."""
        lists = [self.samples.get(c.id, []) for c in self.communities] or [self.fallback]
        out: dict[str, Chunk] = {}
        for i in range(max((len(x) for x in lists), default=0)):
            for x in lists:
                if i < len(x):
                    out.setdefault(x[i].id, x[i])
        return list(out.values())


@dataclass
class Neighbourhood:
    """A follow-up's context."""

    chunks: list[Chunk] = field(default_factory=list)  # scoped search, best first
    neighbours: list[Chunk] = field(default_factory=list)  # chunks naming the related entities
    neighbour_ids: list[str] = field(default_factory=list)  # every chunk found naming them
    entities: list[tuple[str, float]] = field(default_factory=list)  # named by the chunks, weighted
    relations: list[RelationshipRef] = field(default_factory=list)  # with labels
    labels: dict[str, str] = field(default_factory=dict)


async def primer_context(
    sources: DriftSources, t: Tenant, vector: list[float], question: str, s: DriftSettings
) -> Primer:
    """The primer's communities and their sample chunks (see the module docstring)."""
    communities = await sources.search_communities(t, vector, s.community_limit)
    if not communities:
        fallback = await sources.search_chunks(t, vector, question, s.community_limit * s.chunks_per_community)
        return Primer([], {}, fallback)
    ids = [c.id for c in communities]
    samples = await sources.community_chunks(t, ids, vector, question, s.chunks_per_community)
    return Primer(communities, samples, [])


async def followup_context(
    sources: DriftSources, t: Tenant, question: str, vector: list[float], targets: Sequence[str], s: DriftSettings
) -> Neighbourhood:
    """A follow-up's chunks in its target communities and their one-hop neighbourhood."""
    nb = Neighbourhood()
    nb.chunks = await sources.search_chunks(t, vector, question, s.followup_chunks, communities=list(targets) or None)
    if not nb.chunks or s.neighbour_entities == 0:
        return nb
    mentions = await sources.links(t, [], [c.id for c in nb.chunks], 1)
    rank = {c.id: i for i, c in enumerate(nb.chunks)}
    weight: defaultdict[str, float] = defaultdict(float)
    for m in mentions:
        if m.chunk_id in rank:
            weight[m.entity] += m.count / (1 + rank[m.chunk_id])
    nb.entities = sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[: s.neighbour_entities]
    if not nb.entities:
        return nb
    named = [e for e, _ in nb.entities]
    relations = await sources.neighbour_relations(t, named, vector, s.neighbour_relations)
    related = list(dict.fromkeys(x for r in relations for x in (r.s, r.o) if x not in weight))
    iris = list(dict.fromkeys([*named, *related, *(r.p for r in relations)]))
    labels, links = await asyncio.gather(
        sources.labels(t, iris),
        sources.links(t, related, [], NEIGHBOUR_PER_ENTITY) if related else _no_links(),
    )
    nb.labels = labels
    nb.relations = [
        r.model_copy(update={"s_label": labels.get(r.s), "p_label": labels.get(r.p), "o_label": labels.get(r.o)})
        for r in relations
    ]
    shared: Counter[str] = Counter(m.chunk_id for m in links if m.chunk_id not in rank)
    nb.neighbour_ids = [c for c, _ in sorted(shared.items(), key=lambda kv: (-kv[1], kv[0]))]
    keep = nb.neighbour_ids[: s.neighbour_chunks]
    if keep:
        nb.neighbours = await sources.chunks(t, keep)
    return nb


async def _no_links() -> list:  # type: ignore[type-arg]
    return []

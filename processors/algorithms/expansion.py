"""How lazy-rag widens a question's neighbourhood over chunk-entity links (pure: the links come from
a read it is given). Each level reads, in one call, the chunks that mention the frontier entities
and the entities the frontier chunks mention; the next frontier is the best `max_entities`
entities not expanded yet (by how strongly the ranked chunks name them) and the chunks not seen
yet. A store runs all the levels inside one read transaction (issue 38: one round trip for the
whole expansion), so the choice of the next frontier is made here, between its reads."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence

from schemas.documents import Mention

# The links of (entities, chunk ids): chunks mentioning the entities and the chunks' mentions.
LinksRead = Callable[[Sequence[str], Sequence[str]], Awaitable[list[Mention]]]


async def expand(
    read: LinksRead, entities: Sequence[str], ranked_chunks: Sequence[str], hops: int, max_entities: int
) -> list[Mention]:
    """The mentions read by `hops` levels of expansion from `entities` and `ranked_chunks` (the
    question's chunks, best first), in the order they were read."""
    known = set(ranked_chunks)
    mentions: list[Mention] = []
    entity_frontier, chunk_frontier = list(entities), list(ranked_chunks)
    expanded: set[str] = set()
    for _ in range(hops):
        if not entity_frontier and not chunk_frontier:
            break
        found = await read(entity_frontier, chunk_frontier)
        expanded.update(entity_frontier)
        seen_chunks = known | {m.chunk_id for m in mentions}
        mentions += found
        chunk_frontier = sorted({m.chunk_id for m in found} - seen_chunks)
        entity_frontier = next_entities(mentions, ranked_chunks, expanded, max_entities)
    return mentions


def next_entities(mentions: Sequence[Mention], ranked_chunks: Sequence[str], done: set[str], limit: int) -> list[str]:
    """The entities to expand next: those the best chunks name most, not expanded yet."""
    rank = {c: i for i, c in enumerate(ranked_chunks)}
    weight: defaultdict[str, float] = defaultdict(float)
    for m in mentions:
        if m.entity not in done:
            weight[m.entity] += 1.0 / (1 + rank.get(m.chunk_id, len(ranked_chunks)))
    return sorted(weight, key=lambda e: -weight[e])[:limit]  # stable, as most_common: ties keep first-seen

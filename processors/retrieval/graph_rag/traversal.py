"""Batched graph traversal: one neighbour round trip per level for the whole frontier.

`relevance` (default) keeps the `edge_limit` edges per level that best match the
question (scored by the store from label embeddings). Its candidates are each frontier
entity's first `candidates_per_entity` edges per direction plus up to `focus_limit` edges
for each focus predicate (those nearest the question), so a hub's relevant edges are
read without reading all of its others. `bfs` keeps edges in store order up to
`triple_limit` per entity. Both stop at `max_path_length` levels or `max_subgraph_size`
triples and never revisit an entity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from processors.retrieval.common import Stopwatch
from processors.retrieval.graph_rag.sources import GraphSources
from schemas.tenant import Tenant
from schemas.terms import Triple
from schemas.triples import NeighboursQuery


@dataclass
class TraversalLimits:
    """Limits of one traversal."""

    max_path_length: int
    max_subgraph_size: int
    triple_limit: int
    edge_limit: int
    candidates_per_entity: int
    max_frontier: int
    mode: Literal["relevance", "bfs"]
    focus_limit: int = 0


@dataclass
class Subgraph:
    """Triples found, with the score of each, the levels read and the rows they read."""

    triples: list[Triple] = field(default_factory=list)
    scores: list[float | None] = field(default_factory=list)
    levels: int = 0
    rows_read: int = 0


def _far_end(t: Triple, near: set[str]) -> str | None:
    """The IRI end of `t` that is not on the frontier (None for literals)."""
    if t.s.value in near:
        return t.o.value if t.o.is_iri else None
    return t.s.value


def _hop_query(
    scope: Tenant,
    frontier: list[str],
    limits: TraversalLimits,
    budget: int,
    query_vector: list[float] | None,
    focus: Sequence[str],
    paths: dict[str, tuple[str, ...]],
) -> NeighboursQuery:
    """One level's neighbour query: scored candidates (relevance), or BFS's first edges per entity."""
    if query_vector is None:
        return NeighboursQuery(
            user=scope.user,
            collection=scope.collection,
            entities=frontier,
            limit_per_entity=limits.triple_limit,
            scope=scope.scope,
        )
    return NeighboursQuery(
        user=scope.user,
        collection=scope.collection,
        scope=scope.scope,
        entities=frontier,
        limit_per_entity=limits.candidates_per_entity,
        query_vector=query_vector,
        max_returned=budget + len(frontier),  # edges back to the previous level come again
        focus=list(focus),
        focus_limit=limits.focus_limit,
        paths={e: list(paths[e]) for e in frontier if e in paths},
    )


async def batched_traversal(
    sources: GraphSources,
    scope: Tenant,
    seeds: Sequence[str],
    limits: TraversalLimits,
    query_vector: list[float] | None,
    focus: Sequence[str] = (),
    watch: Stopwatch | None = None,
) -> Subgraph:
    """Expand from `seeds` level by level (each level a `hop_N` stage of `watch`); see the module
    docstring."""
    out = Subgraph()
    seen: set[tuple[str, str, str, bool]] = set()
    visited: set[str] = set(seeds)
    paths: dict[str, tuple[str, ...]] = {}  # entity → the relations that led to it from a seed
    frontier = list(dict.fromkeys(seeds))[: limits.max_frontier]
    relevance = limits.mode == "relevance" and query_vector is not None
    for level in range(1, limits.max_path_length + 1):
        if not frontier or len(out.triples) >= limits.max_subgraph_size:
            break
        room = limits.max_subgraph_size - len(out.triples)
        # Edges back to the previous level come again; ask for enough to still fill edge_limit.
        # Keep room for the levels still to come, or a large edge-limit spends it all on level 1.
        levels_left = limits.max_path_length - level + 1
        budget = min(limits.edge_limit, max(1, room // levels_left)) if relevance else room
        query = _hop_query(scope, frontier, limits, budget, query_vector if relevance else None, focus, paths)
        batch = await sources.neighbours(query)
        out.levels += 1
        out.rows_read += batch.rows_read
        near = set(frontier)
        added = 0
        next_frontier: dict[str, None] = {}
        for t, score in zip(batch.triples, batch.scores, strict=True):
            key = (t.s.value, t.p.value, t.o.value, t.o.is_iri)
            if key in seen:
                continue
            if added >= budget:
                break
            seen.add(key)
            out.triples.append(t)
            out.scores.append(score)
            added += 1
            far = _far_end(t, near)
            if far is not None and far not in visited:
                visited.add(far)
                next_frontier[far] = None
                paths[far] = (*paths.get(t.o.value if far == t.s.value else t.s.value, ()), t.p.value)
        if watch is not None:
            watch.lap(f"hop_{level}")
        frontier = list(next_frontier)[: limits.max_frontier]
    return out

"""lazy-rag's searches that follow a multi-hop question onward (bus-free): the follow-up round
from the names its best chunks give (`follow_bridges`) and the question's own hops, searched
innermost first with the bridge each hop finds fed into the next (`follow_hops`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from processors.algorithms.bridges import bridges, fuse
from processors.algorithms.hops import decompose, hop_query
from processors.algorithms.text_match import normalize
from processors.retrieval.lazy_rag.sources import LazySources
from schemas.documents import Chunk
from schemas.tenant import Tenant


@dataclass
class HopRankings:
    """What the hop-by-hop searches found: (weight, ranked chunk ids) each, and the chunks."""

    rankings: list[tuple[float, list[str]]] = field(default_factory=list)
    chunks: dict[str, Chunk] = field(default_factory=dict)


async def follow_hops(
    sources: LazySources, t: Tenant, query: str, max_hops: int, seeds: int, per_seed: int, depth: int,
    weights: tuple[float, float], best_sentences: int = 0,
) -> HopRankings:  # fmt: skip
    """The question's hops (algorithms/hops) searched innermost first, at most `max_hops`: the
    first as it reads; each next one once per name the best `seeds` chunks of the previous hop
    give (`per_seed` each, from their `best_sentences` best-matching sentences when set), the
    name added. One embeddings call and one search call a hop. The first hop's ranking weighs
    `weights[0]` (it often repeats the question's own); a later hop's `h` (from 1), from the name
    of seed `i`, `weights[1]` / 2^(h - 1 + i): the deeper and the weaker, the less."""
    hops = decompose(query)[:max_hops]
    out = HopRankings()
    if not hops:
        return out
    said = f" {normalize(query)} "
    searches = [hops[0]]
    previous, level, origin = hops[0], 0, [0]
    for hop in [*hops[1:], None]:
        vectors = await sources.embed_texts(searches, query=True)
        found = await sources.search_many(t, list(zip(vectors, searches, strict=True)), depth)
        for i, cs in zip(origin, found, strict=True):
            w = weights[0] if level == 0 else weights[1] / 2 ** (level - 1 + i)
            out.rankings.append((w, [c.id for c in cs]))
            out.chunks.update({c.id: c for c in cs})
        if hop is None:
            break
        frontier = _best(found, seeds)
        names = _leads(frontier, previous, said, per_seed, best_sentences)
        if not names:
            break
        searches = [hop_query(hop, name) for _, name in names]
        origin = [i for i, _ in names]
        previous, level = hop, level + 1
    return out


def _best(rankings: list[list[Chunk]], n: int) -> list[Chunk]:
    """The best `n` distinct chunks of `rankings`: their firsts (best ranking first), then their
    seconds, and so on."""
    out: dict[str, Chunk] = {}
    for rank in range(max((len(r) for r in rankings), default=0)):
        for r in rankings:
            if rank < len(r) and len(out) < n:
                out.setdefault(r[rank].id, r[rank])
    return list(out.values())


def _leads(frontier: list[Chunk], hop: str, said: str, per_seed: int, best_sentences: int) -> list[tuple[int, str]]:
    """(seed, name): the bridge names of each chunk of `frontier` for `hop`, but those the
    question says (` said `: they lead nowhere new)."""
    found = [(i, b.name) for i, c in enumerate(frontier) for b in bridges(hop, c.text, per_seed, best_sentences)]
    return [(i, n) for i, n in found if f" {normalize(n)} " not in said]


async def follow_bridges(
    sources: LazySources, t: Tenant, query: str, hits: list[Chunk], seeds: int, names: int, depth: int,
    hops: HopRankings | None = None, best_sentences: int = 0, next_hop: str | None = None,
) -> list[Chunk]:  # fmt: skip
    """`hits` fused with the follow-up searches of the names their best `seeds` chunks give
    (`names` each, from their `best_sentences` best-matching sentences when set) and with the
    `hops` rankings. A follow-up search asks what the question still asks, or with `next_hop`
    only the question's hop after its first (algorithms/hops), the name added."""
    hops = hops or HopRankings()
    ranked = enumerate(hits[:seeds])
    found_names = [(i, b) for i, c in ranked for b in bridges(query, c.text, names, best_sentences)]
    follow = [(i, hop_query(next_hop, b.name) if next_hop else b.query) for i, b in found_names]
    if not follow and not hops.rankings:
        return hits
    found: list[list[Chunk]] = []
    if follow:
        # two seeds often name the same bridge: embed and search each query once
        queries = list(dict.fromkeys(q for _, q in follow))
        vectors = await sources.embed_texts(queries, query=True)
        searched = await sources.search_many(t, list(zip(vectors, queries, strict=True)), depth)
        by_query = dict(zip(queries, searched, strict=True))
        found = [by_query[q] for _, q in follow]
    known = hops.chunks | {c.id: c for cs in found for c in cs} | {c.id: c for c in hits}
    follow_ups = [(i, [c.id for c in cs]) for (i, _), cs in zip(follow, found, strict=True)]
    fused = fuse([c.id for c in hits], follow_ups, weighted=hops.rankings)
    return [known[c].model_copy(update={"score": round(sc, 6)}) for c, sc in fused]

"""One read contract for the document store on SQLite and on the real Neo4j: the candidates
chunk search ranks (exact cosines; BM25 hits are exactly the chunks holding a term), links,
chunks, relations, deleting a collection, tenant isolation, injection strings, and a seeded
property test that no result ever comes from outside a scope and a scoped search finds what a
fresh collection of the scope's documents finds. Writes, unlinking, listing and counts:
test_document_store_writes.py. Graphrank's own reads (named concepts, hop links):
test_passage_reads_contract.py. Communities: test_community_store_contract.py (same fixture)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from processors.ingest.communities.detect import CommunityParams
from processors.ingest.communities.update import recluster
from processors.query.documents.search import FUSION_DEPTH
from processors.stores.documents_protocol import (
    ChunkQuery,
    CommunityGraph,
    DocumentCounts,
    DocumentRecord,
    RelationChunk,
    RelationHit,
)
from schemas.documents import Scope, SearchMode
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import (
    NAMES,
    REL,
    DocBackend,
    communities_of,
    e,
    in_scope,
    mentions_of,
    random_corpus,
    random_scope,
    record,
    reference_cosines,
    reference_relations_of,
    search,
    sources,
    support,
    term_holders,
)
from tests.integration.store_fixtures import near, unit

MODES: tuple[SearchMode, ...] = ("vector", "lexical", "fused")


async def assert_search(
    docs: DocBackend, tenant: tuple[str, str], records: list[DocumentRecord], vector: list[float], text: str,
    limit: int, scope: Scope | None, allowed: set[str] | None,
) -> None:  # fmt: skip
    """Vector search is the exact cosine ranking of the scope; lexical search finds exactly the
    scope's chunks holding a query term (all of them when they fit); fused and graph rank what
    those find, and nothing comes from outside `allowed`."""
    depth = FUSION_DEPTH * limit
    cosines = reference_cosines(records, vector, allowed)
    want = sorted(cosines.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]
    deep = await search(docs, Tenant(*tenant, scope), vector, text, "vector", depth)
    assert [c.id for c in deep] == [c for c, _ in want]
    # within 1e-4: SQLite keeps a chunk's vector in float16 (issue 38), a cosine exact to ~3e-5
    assert [c.score for c in deep] == pytest.approx([s for _, s in want], abs=1e-4)
    holders = term_holders(records, text, allowed)
    lexical = await search(docs, Tenant(*tenant, scope), vector, text, "lexical", depth)
    assert {c.id for c in lexical} <= holders and len(lexical) == min(depth, len(holders))
    assert [c.score for c in lexical] == sorted((c.score for c in lexical), reverse=True)
    for mode in ("fused", "graph"):
        got = await search(docs, Tenant(*tenant, scope), vector, text, mode, limit)
        assert {c.id for c in got} <= {c.id for c in deep} | holders | set(cosines), mode
        assert len(got) == min(limit, len(cosines)) or mode == "fused"
        assert allowed is None or {c.document_id for c in got} <= allowed
        assert [c.score for c in got] == sorted((c.score for c in got), reverse=True)


async def assert_relations(
    docs: DocBackend, tenant: tuple[str, str], records: Sequence[DocumentRecord], vector: list[float], scope: Scope
) -> None:
    """Entities' relations, source chunks, scoped entities and edges: exactly the scope's (oracles
    from the records)."""
    inside = [r for r in records if in_scope(r, scope)]
    allowed = {r.document.id for r in inside}
    for ents, per in ((NAMES[:2], 2), (NAMES, 1), (NAMES[3:], 50)):
        got = await docs.documents.relations_of(Tenant(*tenant, scope), [e(x) for x in ents], per)
        assert sorted((h.s, h.p, h.o, h.support) for h in got) == sorted(
            (*k, n) for k, n in reference_relations_of(records, [e(x) for x in ents], per, allowed).items()
        ), (ents, per)
        assert len(got) == len({(h.s, h.p, h.o) for h in got})  # each relation once
    held = sources(inside)
    pairs = await docs.documents.relation_chunks(ChunkQuery(Tenant(*tenant, scope)), sorted(support(records)), 1)
    assert sorted((x.relation, x.chunk_id) for x in pairs) == sorted((k, min(c)) for k, c in held.items())
    assert await docs.documents.scoped_entities(Tenant(*tenant, scope)) == {
        m.entity for r in inside for m in r.mentions
    }
    frontier = [e(x) for x in ("curie", "piano", "paris")]
    edges = await docs.documents.scoped_neighbours(Tenant(*tenant, scope), frontier, 2)
    out = [(k, x) for x in frontier for k in sorted(k for k in held if k[0] == x)[:2]]  # by (p, o)
    into = [(k, x) for x in frontier for k in sorted((k for k in held if k[2] == x), key=lambda k: (k[1], k[0]))[:2]]
    want_edges = [((*k, 0, "", ""), x) for k, x in out + into]
    assert edges == want_edges


async def test_search_modes_rank_the_stores_candidates(docs: DocBackend) -> None:
    user, coll = docs.scope()
    records = random_corpus(np.random.default_rng(1), 12)
    await docs.documents.store(Tenant(user, coll), records)
    scopes = [None, Scope(document_ids=["d1", "d4", "d7", "zz"]), Scope(metadata={"group": ["g0", "g2"], "tags": "t1"})]
    for n, (text, limit) in enumerate([("album river studies", 5), ("curie paris the", 3), ("music music bridge", 20)]):
        vector = near(unit(7000 + n), 99 + n, 0.5)
        for scope in scopes:
            allowed = {r.document.id for r in records if in_scope(r, scope)} if scope else None
            await assert_search(docs, (user, coll), records, vector, text, limit, scope, allowed)
    chunk = records[3].chunks[0]
    (hit,) = await search(docs, Tenant(user, coll), records[3].vectors[0], None, "vector", 1)
    assert hit.model_dump(exclude={"score"}) == chunk.model_copy(update={"title": "D3"}).model_dump(exclude={"score"})
    assert await search(docs, Tenant(user, coll), None, "the", "fused", 5) == []  # stopwords only
    assert await search(docs, Tenant(user, coll, Scope(document_ids=[])), unit(5), "album", "fused", 5) == []


async def test_links_cap_per_entity_and_read_both_directions(docs: DocBackend) -> None:
    user, coll = docs.scope()
    a = record("a", ["t0", "t1", "t2", "t3"], mentions=[(0, "curie", 1), (1, "curie", 3), (2, "curie", 3),
               (3, "curie", 2), (0, "paris", 1), (3, "seine", 1), (3, "seine", 2)])  # fmt: skip
    b = record("b", ["u0"], mentions=[(0, "curie", 5), (0, "paris", 2)])
    await docs.documents.store(Tenant(user, coll), [a, b])

    async def links(ents: list[str], chunks: list[str], per: int, scope: Scope | None = None) -> set[tuple]:  # type: ignore[type-arg]
        found = await docs.documents.links(ChunkQuery(Tenant(user, coll, scope)), [e(x) for x in ents], chunks, per)
        return {(m.entity[len("http://e/") :], m.chunk_id, m.count) for m in found}

    assert await links(["curie"], [], 3) == {("curie", "b:0", 5), ("curie", "a:1", 3), ("curie", "a:2", 3)}
    assert await links(["curie", "paris"], [], 1) == {("curie", "b:0", 5), ("paris", "b:0", 2)}
    assert await links([], ["a:3"], 1) == {("curie", "a:3", 2), ("seine", "a:3", 3)}  # mentions summed, no cap
    assert await links(["paris"], ["a:0", "zz"], 10) == {("paris", "a:0", 1), ("paris", "b:0", 2), ("curie", "a:0", 1)}
    in_a = Scope(document_ids=["a"])
    assert await links(["curie"], [], 3, in_a) == {("curie", "a:1", 3), ("curie", "a:2", 3), ("curie", "a:3", 2)}
    assert await links(["paris"], ["a:0"], 10, Scope(document_ids=["b"])) == {("paris", "b:0", 2)}
    assert await links(["louvre"], [], 5) == set()


async def test_chunks_come_in_the_order_asked_inside_the_scope(docs: DocBackend) -> None:
    user, coll = docs.scope()
    a, b = record("a", ["one two", "three"]), record("b", ["four five six"], metadata={"k": "v"})
    await docs.documents.store(Tenant(user, coll), [a, b])
    got = await docs.documents.chunks(Tenant(user, coll), ["b:0", "zz", "a:1", "b:0", "a:0"])
    assert [c.id for c in got] == ["b:0", "a:1", "a:0"]
    assert got[0] == b.chunks[0].model_copy(update={"title": "B"}) and got[1].start == 8 and got[1].end == 13
    assert [
        c.id for c in await docs.documents.chunks(Tenant(user, coll, Scope(metadata={"k": "v"})), ["a:0", "b:0"])
    ] == ["b:0"]
    assert await docs.documents.chunks(Tenant(user, coll, Scope(document_ids=["b"])), ["a:0"]) == []
    assert await docs.documents.chunks(Tenant(user, coll), []) == []


async def test_chunks_keep_the_page_and_heading_of_their_file(docs: DocBackend) -> None:
    user, coll = docs.scope()
    a = record("slides", ["radium glows", "polonium was named"])
    a.chunks[0] = a.chunks[0].model_copy(update={"page": 1, "section": "Radium"})
    a.chunks[1] = a.chunks[1].model_copy(update={"page": 2, "section": "Polonium"})
    await docs.documents.store(Tenant(user, coll), [a, record("plain", ["no pages here"])])
    got = await docs.documents.chunks(Tenant(user, coll), ["slides:1", "slides:0", "plain:0"])
    assert [(c.page, c.section) for c in got] == [(2, "Polonium"), (1, "Radium"), (None, "")]


async def test_relation_weight_is_its_support_in_scope(docs: DocBackend) -> None:
    user, coll = docs.scope()
    a = record("a", ["x", "y"], relations=[("curie", "paris", [0, 1, 1]), ("paris", "warsaw", [1])])
    b = record("b", ["z"], relations=[("curie", "paris", [0]), ("curie", "seine", [0])])
    await docs.documents.store(Tenant(user, coll), [a, b])
    every = [e(x) for x in ("curie", "paris", "warsaw", "seine", "louvre")]

    async def rels(ents: list[str], limit: int = 10, scope: Scope | None = None) -> list[tuple[str, str, int]]:
        found = await docs.documents.relations(Tenant(user, coll, scope), ents, limit)
        assert all(h.p == REL and h.score is None for h in found)
        return [(h.s[len("http://e/") :], h.o[len("http://e/") :], h.support) for h in found]

    assert await rels(every) == [("curie", "paris", 3), ("curie", "seine", 1), ("paris", "warsaw", 1)]
    assert await rels(every, 1) == [("curie", "paris", 3)]
    assert await rels([e("curie"), e("paris")]) == [("curie", "paris", 3)]  # both ends among the entities
    assert await rels([e("curie"), e("warsaw")]) == []
    assert await rels(every, scope=Scope(document_ids=["a"])) == [("curie", "paris", 2), ("paris", "warsaw", 1)]
    assert await rels(every, scope=Scope(document_ids=["b"])) == [("curie", "paris", 1), ("curie", "seine", 1)]


async def test_relations_of_sources_and_scoped_reach(docs: DocBackend) -> None:
    user, coll = docs.scope()
    a = record("a", ["x", "y"], mentions=[(0, "curie", 1), (1, "warsaw", 1)],
               relations=[("curie", "paris", [0, 1]), ("paris", "warsaw", [1])])  # fmt: skip
    b = record("b", ["z"], mentions=[(0, "seine", 1)], relations=[("curie", "paris", [0]),
               ("curie", "seine", [0]), ("louvre", "seine", [0])])  # fmt: skip
    await docs.documents.store(Tenant(user, coll), [a, b])
    cp, pw, cs = (e("curie"), REL, e("paris")), (e("paris"), REL, e("warsaw")), (e("curie"), REL, e("seine"))

    async def of(names: list[str], per: int, scope: Scope | None = None) -> set[tuple[object, ...]]:
        found = await docs.documents.relations_of(Tenant(user, coll, scope), [e(x) for x in names], per)
        return {(h.s, h.p, h.o, h.support) for h in found}

    assert await of(["paris"], 10) == {(*cp, 3), (*pw, 1)}  # as object and as subject
    assert await of(["curie"], 1) == {(*cp, 3)}  # the most supported first
    assert await of(["curie", "paris"], 10) == {(*cp, 3), (*pw, 1), (*cs, 1)}  # each once
    assert await of(["paris"], 10, Scope(document_ids=["b"])) == {(*cp, 1)}  # support in scope
    assert await of(["warsaw"], 10, Scope(document_ids=["b"])) == set()
    assert await of([], 10) == set() and await of(["nobody"], 10) == set()

    pairs = await docs.documents.relation_chunks(ChunkQuery(Tenant(user, coll)), [cp, pw, (e("x"), REL, e("y"))], 2)
    assert sorted(pairs, key=repr) == [RelationChunk(cp, "a:0"), RelationChunk(cp, "a:1"), RelationChunk(pw, "a:1")]
    assert await docs.documents.relation_chunks(
        ChunkQuery(Tenant(user, coll, Scope(document_ids=["b"]))), [cp, pw], 5
    ) == [RelationChunk(cp, "b:0")]
    assert await docs.documents.scoped_entities(Tenant(user, coll, Scope(document_ids=["a"]))) == {
        e("curie"),
        e("warsaw"),
    }
    with pytest.raises(ValueError):
        await docs.documents.scoped_entities(Tenant(user, coll, Scope()))
    edges = await docs.documents.scoped_neighbours(
        Tenant(user, coll, Scope(document_ids=["a"])), [e("paris"), e("curie")], 1
    )
    assert edges == [((*pw, 0, "", ""), e("paris")), ((*cp, 0, "", ""), e("curie")), ((*cp, 0, "", ""), e("paris"))]
    in_b = await docs.documents.scoped_neighbours(Tenant(user, coll, Scope(metadata={"k": "none"})), [e("curie")], 5)
    assert in_b == []
    await docs.documents.delete_documents(Tenant(user, coll), ["a"])
    assert await of(["curie", "paris"], 10) == {(*cp, 1), (*cs, 1)}  # a's sources went with it
    after = await docs.documents.relation_chunks(ChunkQuery(Tenant(user, coll)), [cp, pw], 5)
    assert after == [RelationChunk(cp, "b:0")]
    await docs.documents.store(Tenant(user, coll), [a])  # back: its sources with it
    assert await of(["curie", "paris"], 10) == {(*cp, 3), (*pw, 1), (*cs, 1)}


async def test_delete_collection_leaves_nothing_and_spares_the_others(docs: DocBackend) -> None:
    user, coll = docs.scope()
    _, keep = docs.scope(user)
    records = random_corpus(np.random.default_rng(2), 5)
    for c in (coll, keep):
        await docs.documents.store(Tenant(user, c), records)
        await docs.communities.replace(Tenant(user, c), communities_of(records))
    await docs.documents.delete_collection(Tenant(user, coll))
    await docs.communities.delete_collection(Tenant(user, coll))
    assert (
        await docs.documents.documents(Tenant(user, coll), 10) == []
        and await docs.communities.list(Tenant(user, coll)) == []
    )
    for mode in ("fused", "graph"):
        assert await search(docs, Tenant(user, coll), unit(1), "album curie", mode, 5) == []
    assert await docs.documents.counts(user) == {keep: DocumentCounts(5, sum(len(r.chunks) for r in records))}
    # loaded again with other documents: graph search ranks the new ones, never an index cached before
    await docs.documents.store(Tenant(user, coll), [record("fresh", ["album curie"])])
    assert [c.id for c in await search(docs, Tenant(user, coll), unit(1), "album curie", "graph", 5)] == ["fresh:0"]
    await docs.documents.delete_collection(Tenant(user, coll))
    assert len(await search(docs, Tenant(user, keep), unit(1), "album curie", "fused", 5)) == 5
    assert len(await docs.communities.list(Tenant(user, keep))) == 3
    await docs.documents.delete_collection(Tenant(user, keep))
    await docs.communities.delete_collection(Tenant(user, keep))
    assert await docs.leftovers(user) == 0


INJECTIONS = ["x' OR '1'='1", '"}) MATCH (n) DETACH DELETE n //', "label:* OR *", "$user {key: $collection}", 'a\\" b']


async def test_injection_strings_are_data(docs: DocBackend) -> None:
    bystander, safe = docs.scope(), [record("safe", ["album river"], mentions=[(0, "curie", 1)])]
    await docs.documents.store(Tenant(*bystander), safe)
    before = await snapshot(docs, *bystander, safe)
    for bad in INJECTIONS:
        user, coll = docs.scope(bad + bystander[0], bad)
        r = record(bad, [bad + " album", "river"], mentions=[(0, bad, 1)], relations=[(bad, "curie", [0])],
                   metadata={bad: bad})  # fmt: skip
        await docs.documents.store(Tenant(user, coll), [r])
        assert await docs.documents.hashes(Tenant(user, coll), [bad]) == {bad: r.content_hash}
        assert [d.id for d in await docs.documents.documents(Tenant(user, coll, Scope(metadata={bad: bad})), 5)] == [
            bad
        ]
        hits = await search(docs, Tenant(user, coll, Scope(document_ids=[bad])), None, bad + " album", "lexical", 5)
        assert (hits[0].id, hits[0].text) == (bad + ":0", bad + " album")  # BM25 reads title + text
        assert await docs.documents.links(ChunkQuery(Tenant(user, coll)), [e(bad)], [], 5) == r.mentions
        assert await docs.documents.relations(Tenant(user, coll), [e(bad), e("curie")], 5) == [
            RelationHit(e(bad), REL, e("curie"), 1)
        ]
        await docs.documents.delete_collection(Tenant(user, coll))
        assert await docs.documents.documents(Tenant(user, coll), 5) == []
    assert await snapshot(docs, *bystander, safe) == before


async def snapshot(docs: DocBackend, user: str, coll: str, records: Sequence[DocumentRecord]) -> tuple[object, ...]:
    """Everything a reader of the collection can see."""
    ids = [c.id for r in records for c in r.chunks]
    ents = sorted({m.entity for r in records for m in r.mentions})
    return (
        await docs.documents.documents(Tenant(user, coll), 100),
        await docs.documents.hashes(Tenant(user, coll), [r.document.id for r in records]),
        [(c.id, c.score) for c in await search(docs, Tenant(user, coll), unit(7000), "album curie", "fused", 50)],
        await docs.documents.chunks(Tenant(user, coll), ids),
        sorted(await docs.documents.links(ChunkQuery(Tenant(user, coll)), ents, ids, 100), key=repr),
        await docs.documents.relations(Tenant(user, coll), ents, 1000),
        await docs.communities.list(Tenant(user, coll)),
        await docs.communities.search(Tenant(user, coll), unit(7001), None, 5),
        await docs.communities.of_entities(Tenant(user, coll), ents, 0),
        await docs.communities.graph(Tenant(user, coll)),
        await docs.communities.stale(Tenant(user, coll)),
    )


async def test_another_user_or_collection_never_sees_or_touches_anything(docs: DocBackend) -> None:
    user, coll = docs.scope()
    records = random_corpus(np.random.default_rng(3), 6)
    await docs.documents.store(Tenant(user, coll), records)
    await docs.communities.replace(Tenant(user, coll), communities_of(records))
    before = await snapshot(docs, user, coll, records)
    assert all(before[:3]) and before[6] and before[7]
    empty = await snapshot(docs, *docs.scope(user), records)
    assert not any(x for x in empty[:9]) and empty[9] == CommunityGraph.of([]) and empty[10] is None
    for u, c in (docs.scope(user), docs.scope(None, coll), docs.scope(user + "x", coll)):
        assert await snapshot(docs, u, c, records) == empty
        other = random_corpus(np.random.default_rng(4), 6)  # same ids, other texts
        await docs.documents.store(Tenant(u, c), other)
        await docs.communities.replace(Tenant(u, c), communities_of(other))
        await docs.communities.mark_stale(Tenant(u, c), [e("curie"), e("piano")])
        stale = await docs.communities.stale(Tenant(u, c))
        assert stale is not None and stale.touched()
        graph = await docs.communities.graph(Tenant(u, c), stale.touched())
        await docs.communities.update(Tenant(u, c), recluster(stale, graph, CommunityParams()))
        await docs.communities.set_summary(Tenant(u, c), "k-low", "x", "s", "m")
        await docs.documents.delete_documents(Tenant(u, c), ["d0", "d1"])
        await docs.documents.delete_collection(Tenant(u, c))
        await docs.communities.delete_collection(Tenant(u, c))
    assert await snapshot(docs, user, coll, records) == before


async def test_random_scopes_never_leak_and_find_what_a_fresh_collection_finds(docs: DocBackend) -> None:
    rng = np.random.default_rng(13)
    records = random_corpus(rng, 10)
    user, coll = docs.scope()
    await docs.documents.store(Tenant(user, coll), records)
    communities = communities_of(records)
    await docs.communities.replace(Tenant(user, coll), communities)
    chunk_ids = sorted(c.id for r in records for c in r.chunks)
    ents = sorted({m.entity for r in records for m in r.mentions})
    for case in range(30):
        scope = random_scope(rng, records)
        inside = [r for r in records if in_scope(r, scope)]
        allowed = {r.document.id for r in inside}
        got = await docs.documents.chunks(Tenant(user, coll, scope), chunk_ids)
        assert [c.id for c in got] == [c for c in chunk_ids if c.split(":")[0] in allowed], scope
        links = await docs.documents.links(ChunkQuery(Tenant(user, coll, scope)), ents, chunk_ids, 1000)
        assert {(m.entity, m.chunk_id, m.count) for m in links} == mentions_of(inside), scope
        rels = await docs.documents.relations(Tenant(user, coll, scope), ents, 1000)
        assert {(h.s, h.p, h.o): h.support for h in rels} == support(inside), scope
        seen = {c for r in communities for c in r.chunks if c.split(":")[0] in allowed}
        want = sorted((-len(r.members), r.id) for r in communities if set(r.chunks) & seen)
        assert [c.id for c in await docs.communities.list(Tenant(user, coll, scope))] == [i for _, i in want]
        found = await docs.communities.search(Tenant(user, coll, scope), unit(7000 + case % 3), None, 4)
        assert {c.id for c in found} <= {i for _, i in want}

        vector = near(unit(7000 + case % 3), case, 0.6)
        text = " ".join(rng.choice(["album", "curie", "river", "piano", "studies"], 2))
        fresh = docs.scope(user, f"fresh-{case}")[1]
        await docs.documents.store(Tenant(user, fresh), inside)
        await assert_relations(docs, (user, coll), records, vector, scope)
        await assert_search(docs, (user, coll), records, vector, text, 6, scope, allowed)
        for mode in (*MODES, "graph"):
            scoped = await search(docs, Tenant(user, coll, scope), vector, text, mode, 50)
            alone = await search(docs, Tenant(user, fresh), vector, text, mode, 50)
            assert {c.id for c in alone} == {c.id for c in scoped}, (mode, scope)  # everything in scope fits
            if mode == "vector":
                assert [(c.id, c.score) for c in alone] == [(c.id, pytest.approx(c.score, abs=1e-6)) for c in scoped]
        await docs.documents.delete_collection(Tenant(user, fresh))

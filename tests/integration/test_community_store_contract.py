"""The community store's contract on SQLite and on the real Neo4j (the `docs` fixture of the
document store contract): replace keeping summaries of unchanged memberships, stale flags,
listing by level / ids / scope, search from the top level down, membership lookups, and what
a build reads."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from processors.ingest.communities.profiles import membership_hash
from processors.stores.documents_protocol import CommunityRecord
from schemas.documents import Scope
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import DocBackend, e, record
from tests.integration.store_fixtures import near, unit


def community(
    cid: str, level: int, members: list[str], chunks: dict[str, float], vector: list[float], parent: str | None = None
) -> CommunityRecord:
    """A community of entity names, with children filled in by `tree`."""
    iris = [e(m) for m in members]
    return CommunityRecord(cid, level, parent, [], iris, chunks, iris[:2], sorted(chunks)[:2], vector,
                           membership_hash(iris))  # fmt: skip


def tree() -> list[CommunityRecord]:
    """k1, k2, k3 at level 0 (k3 without a vector, one chunk unknown to the store); p1 over k1
    and k2, p2 over k3 at level 1."""
    out = [
        community("k1", 0, ["curie", "paris", "warsaw"], {"a:0": 2.0, "a:1": 1.0}, near(unit(1), 1, 0.1), "p1"),
        community("k2", 0, ["seine", "louvre"], {"b:0": 2.0}, near(unit(2), 2, 0.1), "p1"),
        community("k3", 0, ["physics"], {"b:1": 1.0, "ghost:0": 1.0}, [], "p2"),
        community("p1", 1, ["curie", "paris", "warsaw", "seine", "louvre"], {"a:0": 2.0, "a:1": 1.0, "b:0": 2.0},
                  near(unit(1), 3, 0.3)),
        community("p2", 1, ["physics"], {"b:1": 1.0, "ghost:0": 1.0}, unit(3)),
    ]  # fmt: skip
    out[3].children, out[4].children = ["k1", "k2"], ["k3"]
    return out


async def stored(docs: DocBackend) -> tuple[str, str]:
    """A tenant holding documents a and b and the communities of `tree`."""
    user, coll = docs.scope()
    a = record("a", ["curie paris", "warsaw"], mentions=[(0, "curie", 1), (0, "paris", 1), (1, "warsaw", 2)],
               relations=[("curie", "paris", [0]), ("curie", "warsaw", [0, 1])])  # fmt: skip
    b = record("b", ["seine louvre", "physics"], mentions=[(0, "seine", 1), (0, "louvre", 1), (1, "physics", 1)],
               relations=[("louvre", "seine", [0])], metadata={"k": "v"})  # fmt: skip
    await docs.documents.store(Tenant(user, coll), [a, b])
    await docs.communities.replace(Tenant(user, coll), tree())
    return user, coll


async def test_list_by_level_ids_and_scope(docs: DocBackend) -> None:
    user, coll = await stored(docs)

    async def ids(scope: Scope | None = None, **kw: object) -> list[str]:
        return [c.id for c in await docs.communities.list(Tenant(user, coll, scope), **kw)]  # type: ignore[arg-type]

    everything = await docs.communities.list(Tenant(user, coll))
    assert [c.id for c in everything] == ["p1", "k1", "k2", "k3", "p2"]  # largest first, then id
    k3 = everything[3]
    assert (k3.level, k3.parent, k3.children, k3.size, k3.chunks) == (0, "p2", [], 1, 2)
    assert everything[0].children == ["k1", "k2"] and everything[0].top_entities == [e("curie"), e("paris")]
    assert everything[0].top_chunks == ["a:0", "a:1"] and not any(c.stale or c.summary for c in everything)
    assert await ids(level=1) == ["p1", "p2"] and await ids(level=2) == []
    assert await ids(ids=["k2", "p1", "zz"]) == ["p1", "k2"] and await ids(ids=[]) == []
    assert await ids(limit=2) == ["p1", "k1"]
    assert await ids(scope=Scope(document_ids=["b"])) == ["p1", "k2", "k3", "p2"]
    assert await ids(scope=Scope(metadata={"k": "v"}), level=0) == ["k2", "k3"]
    assert await ids(scope=Scope(document_ids=["a"]), limit=1) == ["p1"]
    assert await ids(scope=Scope(document_ids=["ghost"])) == []


async def test_summaries_survive_a_rebuild_only_for_the_same_membership(docs: DocBackend) -> None:
    user, coll = await stored(docs)
    k1, k2 = tree()[0], tree()[1]
    assert await docs.communities.membership(Tenant(user, coll), ["k1", "p1", "zz"]) == {
        "k1": k1.membership_hash,
        "p1": tree()[3].membership_hash,
    }
    await docs.communities.set_summary(Tenant(user, coll), "k1", "stale-hash", "ignored", "m0")
    await docs.communities.set_summary(Tenant(user, coll), "k2", k2.membership_hash, "about the Seine", "m1")
    await docs.communities.set_summary(Tenant(user, coll), "k1", k1.membership_hash, "about Curie", "m1")
    (got,) = await docs.communities.list(Tenant(user, coll), ids=["k1"])
    assert (got.summary, got.summary_model) == ("about Curie", "m1")

    await docs.communities.mark_stale(Tenant(user, coll), [e("warsaw"), e("nobody")])
    stale = {c.id for c in await docs.communities.list(Tenant(user, coll)) if c.stale}
    assert stale == {"k1", "p1"}
    await docs.communities.mark_stale(Tenant(user, coll), [])

    renamed = community("k1-new", 0, ["curie", "paris", "warsaw"], {"a:0": 2.0}, unit(1))  # same members
    grown = community("k2", 0, ["seine", "louvre", "physics"], {"b:0": 2.0, "b:1": 1.0}, unit(2))
    await docs.communities.replace(Tenant(user, coll), [renamed, grown])
    after = {c.id: c for c in await docs.communities.list(Tenant(user, coll))}
    assert set(after) == {"k1-new", "k2"} and not any(c.stale for c in after.values())
    assert (after["k1-new"].summary, after["k1-new"].summary_model) == ("about Curie", "m1")
    assert after["k2"].summary is None
    assert await docs.communities.of_entities(Tenant(user, coll), [e("physics"), e("curie")], 1) == {}


async def test_membership_by_entity_and_level(docs: DocBackend) -> None:
    user, coll = await stored(docs)
    ents = [e(x) for x in ("curie", "seine", "physics", "nobody")]
    assert await docs.communities.of_entities(Tenant(user, coll), ents, 0) == {
        ents[0]: "k1",
        ents[1]: "k2",
        ents[2]: "k3",
    }
    assert await docs.communities.of_entities(Tenant(user, coll), ents, 1) == {
        ents[0]: "p1",
        ents[1]: "p1",
        ents[2]: "p2",
    }
    assert await docs.communities.of_entities(Tenant(user, coll), ents, 2) == {}


async def test_search_goes_top_level_first_and_falls_back(docs: DocBackend) -> None:
    user, coll = await stored(docs)
    q = near(unit(1), 9, 0.2)

    async def search(level: int | None, limit: int, scope: Scope | None = None) -> list[tuple[str, float]]:
        found = await docs.communities.search(Tenant(user, coll, scope), q, level, limit)
        return [(c.id, c.score or 0.0) for c in found]

    def cos(v: list[float]) -> float:
        a, b = np.asarray(v, dtype=np.float32), np.asarray(q, dtype=np.float32)
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    want0 = [("k1", cos(tree()[0].vector)), ("k2", cos(tree()[1].vector))]  # k3 has no vector
    assert await search(0, 5) == [(i, pytest.approx(s, abs=1e-5)) for i, s in want0]
    top = await search(None, 2)  # level 1 has 2 >= max(1, 2 // 2)
    assert [i for i, _ in top] == ["p1", "p2"] and top[0][1] == pytest.approx(cos(tree()[3].vector), abs=1e-5)
    assert [i for i, _ in await search(None, 6)] == ["k1", "k2"]  # 2 < 3 at level 1: level 0
    assert [i for i, _ in await search(None, 2, Scope(document_ids=["a"]))] == ["p1"]
    assert [i for i, _ in await search(0, 5, Scope(metadata={"k": "v"}))] == ["k2"]
    assert await search(None, 5, Scope(document_ids=[])) == []

    flat = [community("f1", 0, ["curie"], {"a:0": 1.0}, unit(5)), community("f2", 0, ["seine"], {"b:0": 1.0}, q)]
    await docs.communities.replace(Tenant(user, coll), flat)
    assert [i for i, _ in await search(None, 6)] == ["f2", "f1"]  # no hierarchy: every level


async def test_graph_is_what_a_build_reads(docs: DocBackend) -> None:
    user, coll = await stored(docs)
    graph = await docs.communities.graph(Tenant(user, coll))
    edges, mentions = graph.edge_rows(), graph.mention_rows()
    assert sorted(edges) == [(e("curie"), e("paris"), 1), (e("curie"), e("warsaw"), 2), (e("louvre"), e("seine"), 1)]
    assert sorted(mentions) == sorted(
        [(e("curie"), "a:0", 1), (e("paris"), "a:0", 1), (e("warsaw"), "a:1", 2), (e("seine"), "b:0", 1),
         (e("louvre"), "b:0", 1), (e("physics"), "b:1", 1)]
    )  # fmt: skip
    sub = await docs.communities.graph(Tenant(user, coll), [e("curie"), e("warsaw"), e("seine"), e("nobody")])
    assert sub.edge_rows() == [(e("curie"), e("warsaw"), 2)]  # only the relations between them
    assert sorted(sub.mention_rows()) == [(e("curie"), "a:0", 1), (e("seine"), "b:0", 1), (e("warsaw"), "a:1", 2)]
    _, other = docs.scope(user)
    assert (await docs.communities.graph(Tenant(user, other))).edge_rows() == []
    await docs.communities.delete_collection(Tenant(user, coll))
    assert await docs.communities.list(Tenant(user, coll)) == []
    assert await docs.communities.of_entities(Tenant(user, coll), [e("curie")], 0) == {}
    assert len((await docs.communities.graph(Tenant(user, coll))).mention_rows()) == 6  # documents stay


async def test_a_record_without_a_vector_gets_its_chunks_mean(docs: DocBackend) -> None:
    user, coll = await stored(docs)  # chunk n of a document has the vector unit(1000 + n)
    made = community("m", 0, ["curie"], {"a:0": 1.0, "b:1": 1.0}, [])
    made.vector_chunks = ["a:0", "b:1", "ghost:0"]  # a chunk the store does not hold adds nothing
    await docs.communities.replace(Tenant(user, coll), iter([made]))  # any iterable, consumed as written
    mean = np.asarray(unit(1000)) + np.asarray(unit(1001))
    hit = await docs.communities.search(Tenant(user, coll), (mean / np.linalg.norm(mean)).tolist(), 0, 1)
    assert [c.id for c in hit] == ["m"] and hit[0].score == pytest.approx(1.0, abs=0.02)


async def test_replaces_at_once_each_complete_and_leave_one_set(docs: DocBackend) -> None:
    user, coll = await stored(docs)  # builds of one collection in several community-build processes at once
    want = await docs.communities.list(Tenant(user, coll))
    chunks = await docs.communities.member_chunks(Tenant(user, coll), [c.id for c in want])
    for _ in range(3):
        await asyncio.gather(*(docs.communities.replace(Tenant(user, coll), tree()) for _ in range(3)))
        assert await docs.communities.list(Tenant(user, coll)) == want
        assert await docs.communities.member_chunks(Tenant(user, coll), [c.id for c in want]) == chunks

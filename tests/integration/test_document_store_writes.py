"""The document store's write contract on SQLite and on the real Neo4j: what a replace or delete
unlinks, hashes, listing and counts, claimed concepts, concurrent stores of one document, and the
deletion notes a later write is checked against. Reads and scoping:
test_document_store_contract.py (same fixture)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from processors.stores.documents_protocol import (
    COLLECTION,
    ChunkQuery,
    DeletedSince,
    DocumentCounts,
    RelationHit,
    RemovedLinks,
)
from processors.stores.neo4j.schema import entity_key
from schemas.documents import Scope
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import REL, DocBackend, e, mentions_of, record, search
from tests.integration.store_fixtures import unit


def unlinked(removed: RemovedLinks) -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    """A RemovedLinks with its lists sorted (their order is not part of the contract)."""
    return sorted(removed.relations), sorted(removed.concepts), sorted(removed.touched)


async def test_deletions_are_remembered_per_document_and_per_collection(docs: DocBackend) -> None:
    """Every delete issues a stamp above all before it; a write stamped before a delete of its
    collection or of one of its documents is refused whole, in its transaction (nothing stored);
    the collection's mark outlives the collection's data and outranks its documents' marks."""
    user, coll = docs.scope()
    _, other = docs.scope(user)
    t = Tenant(user, coll)
    begun = await docs.documents.write_stamp(t)
    assert begun == 0.0
    first = await docs.documents.note_deleted(t, ["a", "b", "a"])
    second = await docs.documents.note_deleted(t, ["a"])
    assert begun < first < second == await docs.documents.write_stamp(t)
    assert await docs.documents.deleted_after(t, ["a", "b", "c"], begun) == {"a", "b"}
    assert await docs.documents.deleted_after(t, ["a", "b", "c"], first) == {"a"}
    assert await docs.documents.deleted_after(t, ["a", "b"], second) == set()  # began after
    assert await docs.documents.deleted_after(Tenant(user, other), ["a", "b"], 0.0) == set()  # the tenant's own
    with pytest.raises(DeletedSince) as refused:
        await docs.documents.store(t, [record("b", ["beta"]), record("c", ["gamma"])], first - 1)
    assert refused.value.ids == {"b"}
    assert await docs.documents.hashes(t, ["b", "c"]) == {}  # neither: the transaction wrote nothing
    await docs.documents.store(t, [record("c", ["gamma"])], begun)  # never deleted: stored
    await docs.documents.store(t, [record("b", ["beta"])], second)  # a load begun after the delete
    assert sorted(await docs.documents.hashes(t, ["b", "c"])) == ["b", "c"]

    gone = await docs.documents.note_deleted(t, [COLLECTION])  # the whole collection, marked first
    await docs.documents.delete_collection(t)  # its marks stay
    assert gone > second and await docs.documents.write_stamp(t) == gone
    assert await docs.documents.deleted_after(t, ["x"], second) == {COLLECTION}
    assert await docs.documents.deleted_after(t, ["a", "x"], gone) == set()  # the documents' marks went
    with pytest.raises(DeletedSince) as refused:
        await docs.documents.store(t, [record("c", ["gamma"])], second)
    assert refused.value.ids == {COLLECTION}
    await docs.documents.store(t, [record("c", ["gamma"])], gone)
    assert list(await docs.documents.hashes(t, ["c"])) == ["c"]
    await docs.documents.delete_collection(t)


async def test_what_a_refused_write_linked_is_found_unsupported(docs: DocBackend) -> None:
    """A refused write's relations and concepts: those stored documents still support stay, the
    rest is reported (owned concepts only) and their claims go."""
    user, coll = docs.scope()
    t = Tenant(user, coll)
    kept = record("kept", ["alpha river"], mentions=[(0, "alpha", 1)], relations=[("alpha", "river", [0])],
                  owned=["alpha"])  # fmt: skip
    await docs.documents.claim(t, {e("alpha"): "alpha", e("lost"): "lost"})
    await docs.documents.store(t, [kept])
    candidates = RemovedLinks(
        relations=[(e("alpha"), REL, e("river")), (e("lost"), REL, e("alpha"))], concepts=[e("alpha"), e("lost")]
    )
    found = await docs.documents.unsupported(t, candidates)
    assert found.relations == [(e("lost"), REL, e("alpha"))] and found.concepts == [e("lost")]
    assert await docs.documents.claimed(t, [e("alpha"), e("lost")]) == {e("alpha")}
    # a write's own new concept is reported though a collection delete dropped its claim meanwhile
    await docs.documents.claim(t, {e("new"): "new"})
    await docs.documents.delete_collection(t)
    if docs.conn is not None:  # and the write indexed it after (its entity node, without the claim's flag)
        node = {"key": entity_key(t, e("new")), "uri": e("new"), "user": user, "collection": coll}
        await docs.conn.write([("MERGE (n:KgEntity {key: $key}) SET n.uri = $uri, n.user = $user, "
                                "n.collection = $collection, n.label = 'new'", node)])  # fmt: skip
    assert (await docs.documents.unsupported(t, RemovedLinks(), [e("new")])).concepts == [e("new")]
    assert (await docs.documents.unsupported(t, RemovedLinks(concepts=[e("new")]))).concepts == []
    await docs.documents.delete_collection(t)


async def test_store_hashes_listing_and_counts(docs: DocBackend) -> None:
    user, coll = docs.scope()
    a = record("a", ["alpha river", "beta mountain"], metadata={"lang": "en", "tags": ["x", "y"]})
    b = record("b", ["gamma album"], metadata={"lang": "fr", "n": 1})
    b.document.timestamp = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert await docs.documents.store(Tenant(user, coll), [b, a]) == RemovedLinks()
    assert await docs.documents.hashes(Tenant(user, coll), ["b", "a", "zz"]) == {
        "a": a.content_hash,
        "b": b.content_hash,
    }
    listed = await docs.documents.documents(Tenant(user, coll), 10)
    assert [(d.id, d.title, d.chunks, d.content_hash) for d in listed] == [
        ("a", "A", 2, a.content_hash),
        ("b", "B", 1, b.content_hash),
    ]
    assert listed[0].timestamp is None and listed[1].timestamp == b.document.timestamp
    assert [d.id for d in await docs.documents.documents(Tenant(user, coll), 1)] == ["a"]
    for scope, want in [
        (Scope(metadata={"tags": "y"}), ["a"]),
        (Scope(metadata={"n": 1}), ["b"]),
        (Scope(metadata={"n": "1"}), []),  # 1 and "1" differ
        (Scope(metadata={"lang": ["fr", "en"], "tags": "x"}), ["a"]),
        (Scope(document_ids=["b", "zz"]), ["b"]),
        (Scope(document_ids=[]), []),
    ]:
        assert [d.id for d in await docs.documents.documents(Tenant(user, coll, scope), 10)] == want, scope
    _, other = docs.scope(user)
    await docs.documents.store(Tenant(user, other), [record("c", ["delta"])])
    assert await docs.documents.counts(user) == {coll: DocumentCounts(2, 3), other: DocumentCounts(1, 1)}


async def test_replace_and_delete_return_what_nothing_links_any_more(docs: DocBackend) -> None:
    user, coll = docs.scope()
    a = record("a", ["curie paris", "curie warsaw"], mentions=[(0, "curie", 1), (0, "paris", 1), (1, "curie", 1),
               (1, "warsaw", 2)], relations=[("curie", "paris", [0]), ("curie", "warsaw", [1])],
               owned=["curie", "warsaw"])  # fmt: skip
    b = record("b", ["curie paris seine"], mentions=[(0, "curie", 1), (0, "paris", 1), (0, "seine", 1)],
               relations=[("curie", "paris", [0]), ("paris", "seine", [0])], owned=["seine"])  # fmt: skip
    await docs.documents.store(Tenant(user, coll), [a, b])
    a2 = record("a", ["paris louvre"], mentions=[(0, "paris", 1), (0, "louvre", 1)],
                relations=[("louvre", "paris", [0])], owned=["louvre"])  # fmt: skip
    removed = unlinked(await docs.documents.store(Tenant(user, coll), [a2]))
    assert removed == ([(e("curie"), REL, e("warsaw"))], [e("warsaw")], [e("curie"), e("paris"), e("warsaw")])
    assert [c.text for c in await docs.documents.chunks(Tenant(user, coll), ["a:0", "a:1"])] == ["paris louvre"]
    assert await docs.documents.hashes(Tenant(user, coll), ["a"]) == {"a": a2.content_hash}
    again = await docs.documents.store(Tenant(user, coll), [a2])  # the same version again unlinks nothing
    assert unlinked(again) == ([], [], [e("louvre"), e("paris")])

    removed = unlinked(await docs.documents.delete_documents(Tenant(user, coll), ["b", "zz"]))
    want_rels = [(e("curie"), REL, e("paris")), (e("paris"), REL, e("seine"))]
    assert removed == (want_rels, [e("curie"), e("seine")], [e("curie"), e("paris"), e("seine")])
    assert await docs.documents.links(ChunkQuery(Tenant(user, coll)), [e("curie"), e("seine")], ["b:0"], 10) == []
    removed = unlinked(await docs.documents.delete_documents(Tenant(user, coll), ["a"]))
    assert removed == ([(e("louvre"), REL, e("paris"))], [e("louvre")], [e("louvre"), e("paris")])
    assert await docs.documents.documents(Tenant(user, coll), 10) == []
    assert await docs.documents.relations(Tenant(user, coll), [e(x) for x in ("curie", "paris", "louvre")], 10) == []
    assert await search(docs, Tenant(user, coll), unit(1), "paris", "fused", 5) == []
    assert await docs.leftovers(user) == 0


async def test_claimed_concepts_are_owned_before_any_document_mentions_them(docs: DocBackend) -> None:
    user, coll = docs.scope()
    await docs.documents.claim(Tenant(user, coll), {e("curie"): "curie", e("warsaw"): "warsaw"})
    assert await docs.documents.claimed(Tenant(user, coll), [e("curie"), e("paris"), e("warsaw")]) == {
        e("curie"),
        e("warsaw"),
    }
    a = record("a", ["curie paris warsaw"], mentions=[(0, "curie", 1), (0, "paris", 1), (0, "warsaw", 1)],
               owned=["curie", "warsaw"])  # fmt: skip
    await docs.documents.store(Tenant(user, coll), [a])
    assert await docs.documents.claimed(Tenant(user, coll), [e("curie"), e("paris"), e("warsaw")]) == {
        e("curie"),
        e("warsaw"),
    }
    _, other = docs.scope(user)
    assert await docs.documents.claimed(Tenant(user, other), [e("curie")]) == set()
    removed = unlinked(await docs.documents.delete_documents(Tenant(user, coll), ["a"]))
    assert removed[1] == [e("curie"), e("warsaw")]  # owned: they leave with the last document


async def test_a_claimed_concept_is_indexings_whoever_stores_its_mentions(docs: DocBackend) -> None:
    user, coll = docs.scope()
    await docs.documents.claim(Tenant(user, coll), {e("seine"): "seine"})  # its creator died before storing
    await docs.documents.claim(Tenant(user, coll), {e("seine"): "seine"})  # and the rerun claims it again
    b = record("b", ["paris seine"], mentions=[(0, "paris", 1), (0, "seine", 1)], owned=[])  # found, not created
    await docs.documents.store(Tenant(user, coll), [b])
    removed = unlinked(await docs.documents.delete_documents(Tenant(user, coll), ["b"]))
    assert removed == ([], [e("seine")], [e("paris"), e("seine")])  # the claimed one goes, paris stays
    assert await docs.leftovers(user) == 0


async def test_stores_of_one_document_at_once_store_it_once(docs: DocBackend) -> None:
    user, _ = docs.scope()  # a redelivered batch, or a retry after a timeout, beside the first attempt
    found = [(0, "curie", 1), (0, "paris", 1), (1, "curie", 1), (1, "warsaw", 2)]
    for n in range(3):
        _, coll = docs.scope(user)
        r = record(f"d{n}", ["curie paris", "curie warsaw"], mentions=found, relations=[("curie", "paris", [0])])
        await asyncio.gather(*(docs.documents.store(Tenant(user, coll), [r]) for _ in range(4)))
        mentions = (await docs.communities.graph(Tenant(user, coll))).mention_rows()  # every mention, repeats too
        assert sorted(mentions) == sorted(mentions_of([r]))
        assert await docs.documents.relations(Tenant(user, coll), [e("curie"), e("paris")], 10) == [
            RelationHit(e("curie"), REL, e("paris"), 1)
        ]

"""A community build, then a one-document write and an update, on SQLite and on the real Neo4j:
only the touched level-0 community is replaced, every other keeps its id and cached summary, the
new concept joins, the ancestors follow (members, size, chunks, hash) and nothing stays stale; the
update finds the level-0 communities a full build finds. The build reads the store's graph as
arrays and writes the communities a page at a time as the processor does."""

from __future__ import annotations

from processors.ingest.communities.detect import CommunityParams, hierarchy
from processors.ingest.communities.profiles import Profiles
from processors.ingest.communities.update import recluster
from processors.stores.documents_protocol import DocumentRecord
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import DocBackend, e, record

PARAMS = CommunityParams(community_max_size=6)
GROUPS, SIZE = 4, 5


def group_doc(g: int) -> DocumentRecord:
    """Group g's concepts g<g>x0..4, mentioned and related pairwise in two chunks."""
    names = [f"g{g}x{i}" for i in range(SIZE)]
    mentions = [(n, x, 1) for n in (0, 1) for x in names]
    relations = [(a, b, [0, 1]) for i, a in enumerate(names) for b in names[i + 1 :]]
    return record(f"d{g}", [" ".join(names), " ".join(reversed(names))], mentions=mentions, relations=relations)


def bridge_doc() -> DocumentRecord:
    """Weak links from group to group (one chunk each)."""
    pairs = [(f"g{g}x0", f"g{(g + 1) % GROUPS}x1") for g in range(GROUPS)]
    return record("bridge", [f"{a} {b}" for a, b in pairs],
                  mentions=[(n, x, 1) for n, p in enumerate(pairs) for x in p],
                  relations=[(a, b, [n]) for n, (a, b) in enumerate(pairs)])  # fmt: skip


async def build(docs: DocBackend, tenant: Tenant) -> None:
    graph = await docs.communities.graph(tenant)
    profiles = Profiles(hierarchy(graph, PARAMS), graph)
    await docs.communities.replace(tenant, (r for page in profiles.pages() for r in page))


async def test_an_update_replaces_only_the_touched_community(docs: DocBackend) -> None:
    user, coll = docs.scope()
    tenant = Tenant(user, coll)
    await docs.documents.store(tenant, [*(group_doc(g) for g in range(GROUPS)), bridge_doc()])
    assert await docs.communities.stale(tenant) is None  # no communities yet: an update would be a build
    await build(docs, tenant)
    before = {c.id: c for c in await docs.communities.list(tenant)}
    leaves = {c.id for c in before.values() if c.level == 0}
    assert len(leaves) == GROUPS and max(c.level for c in before.values()) >= 1
    owner = await docs.communities.of_entities(tenant, [e("g0x1"), e("g2x3")], 0)
    touched_id, untouched_id = owner[e("g0x1")], owner[e("g2x3")]
    hashes = await docs.communities.membership(tenant, [untouched_id])
    await docs.communities.set_summary(tenant, untouched_id, hashes[untouched_id], "group two", "m")

    new = record("new", ["g0x1 g0x2 fresh"], mentions=[(0, "g0x1", 1), (0, "g0x2", 1), (0, "fresh", 1)],
                 relations=[("g0x1", "fresh", [0]), ("g0x2", "fresh", [0])])  # fmt: skip
    await docs.documents.store(tenant, [new])
    await docs.communities.mark_stale(tenant, [e("g0x1"), e("g0x2"), e("fresh")])  # as the document store does
    stale = await docs.communities.stale(tenant)
    assert stale is not None and list(stale.communities) == [touched_id] and stale.pending == [e("fresh")]
    parent = before[touched_id].parent
    assert stale.ancestors[touched_id][:1] == [parent]

    change = recluster(stale, await docs.communities.graph(tenant, stale.touched()), PARAMS)
    await docs.communities.update(tenant, change)
    after = {c.id: c for c in await docs.communities.list(tenant)}
    new_leaves = {c.id for c in after.values() if c.level == 0}
    assert new_leaves - {change.added[0].id} == leaves - {touched_id}  # every other leaf kept its id
    assert touched_id not in after and len(change.added) == 1
    assert after[untouched_id].summary == "group two"  # and its cached summary
    joined = await docs.communities.of_entities(tenant, [e("fresh"), e("g0x3")], 0)
    assert joined == {e("fresh"): change.added[0].id, e("g0x3"): change.added[0].id}
    assert (await docs.communities.of_entities(tenant, [e("fresh")], 1)) == {e("fresh"): parent}
    up = after[parent]
    assert up.size == before[parent].size + 1 and change.added[0].id in up.children and touched_id not in up.children
    assert (await docs.communities.membership(tenant, [parent]))[parent] != hashes.get(parent)
    assert "new:0" in (await docs.communities.member_chunks(tenant, [parent]))[parent]  # the chunks follow
    assert not any(c.stale for c in after.values())
    again = await docs.communities.stale(tenant)
    assert again is not None and again.touched() == []  # nothing left to update

    full = hierarchy(await docs.communities.graph(tenant), PARAMS)  # what a build would find now
    assert set(full.ids[0]) == new_leaves

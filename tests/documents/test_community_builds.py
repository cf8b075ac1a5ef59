"""Community builds are debounced: one at a time per collection, a burst of requests shares one
next build, a build hands the store its communities as they are made (not a list of them all), and
an update after a write re-clusters only the communities it touched (the Coalescer alone, then the
community-build processor on the embedded stores with the real pipeline)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.ingest.communities.coalesce import Coalescer
from processors.stores.settings import StoreSettings
from schemas.communities import BuildCommunities
from schemas.documents import Document, LoadDocuments
from schemas.services import COMMUNITY_BUILD, DOCUMENT_LOAD
from schemas.tenant import Tenant
from tests.documents.test_documents_flow import DOCS

U, C = "builds", "burst"


async def test_one_run_at_a_time_per_key_and_a_burst_shares_the_next() -> None:
    builds: Coalescer[int] = Coalescer()
    gate, runs, active, peak = asyncio.Event(), list[int](), [0], [0]

    async def job() -> int:
        n = len(runs) + 1
        runs.append(n)
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        await gate.wait()
        active[0] -= 1
        return n

    first = asyncio.create_task(builds.run("c", job))
    await asyncio.sleep(0.01)  # running now
    burst = [asyncio.create_task(builds.run("c", job)) for _ in range(5)]
    other = asyncio.create_task(builds.run("d", job))  # another collection does not wait
    await asyncio.sleep(0.01)
    assert len(runs) == 2 and peak[0] == 2  # "c" once, "d" once; the burst waits
    gate.set()
    assert await first == 1 and await other == 2
    assert [await b for b in burst] == [3] * 5  # one shared next run
    assert await builds.run("c", job) == 4  # after it, a new request is a new run
    assert len(runs) == 4


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        yield s


async def test_a_burst_of_build_requests_builds_at_most_twice(system: System) -> None:
    loader = RequestResponseClient.for_service(system.bus, DOCUMENT_LOAD, "default", 120)
    docs = [*DOCS, Document(id="seine", title="Seine", text="The Seine flows through Paris to the sea.")]
    await loader.request(LoadDocuments(user=U, collection=C, documents=docs))
    stores = system.stores.communities
    reads: list[str] = []
    graph, replace = stores.graph, stores.replace

    async def counted_graph(*args: Any) -> Any:
        reads.append("graph")
        return await graph(*args)

    async def seen_replace(tenant: Tenant, records: Any) -> Any:
        reads.append(type(records).__name__)
        return await replace(tenant, records)

    stores.graph, stores.replace = counted_graph, seen_replace  # type: ignore[method-assign]
    builder = RequestResponseClient.for_service(system.bus, COMMUNITY_BUILD, "default", 120)
    built = await asyncio.gather(*(builder.request(BuildCommunities(user=U, collection=C)) for _ in range(4)))
    assert 1 <= reads.count("graph") <= 2  # not four: the burst shared a build
    assert all(b.levels == built[0].levels and b.levels for b in built)
    assert "generator" in reads and "list" not in reads  # records made as the store writes them
    listed = await stores.list(Tenant(U, C))
    assert sum(c.level == 0 for c in listed) == built[0].levels[0]
    assert await stores.search(Tenant(U, C), [1.0] + [0.0] * 383, 0, 3)  # profile vectors were written


async def test_an_update_after_a_write_replaces_only_what_it_touched(system: System) -> None:
    loader = RequestResponseClient.for_service(system.bus, DOCUMENT_LOAD, "default", 120)
    builder = RequestResponseClient.for_service(system.bus, COMMUNITY_BUILD, "default", 120)
    stores, tenant = system.stores.communities, Tenant(U, "update")
    first = await builder.request(BuildCommunities(user=U, collection="update", update=True))
    assert first.levels == {}  # nothing written yet: an update of nothing is an (empty) build
    await loader.request(LoadDocuments(user=U, collection="update", documents=DOCS))
    await builder.request(BuildCommunities(user=U, collection="update"))
    before = {c.id for c in await stores.list(tenant, level=0)}
    text = "Marie Curie won the Nobel Prize in Stockholm. Stockholm is the capital of Sweden."
    await loader.request(LoadDocuments(user=U, collection="update", documents=[
        Document(id="nobel", title="Nobel", text=text)]))  # fmt: skip
    stale = await stores.stale(tenant)
    assert stale is not None and stale.communities and stale.pending  # Curie's community; Stockholm is new
    updated = await builder.request(BuildCommunities(user=U, collection="update", update=True))
    after = {c.id for c in await stores.list(tenant, level=0)}
    assert updated.levels.get(0) == len(after - before) >= 1
    assert before - set(stale.communities) <= after  # every untouched community kept its id
    assert not set(stale.communities) & after
    members = await stores.of_entities(tenant, stale.pending, 0)
    assert set(members.values()) <= after - before and members  # the new concepts joined new communities
    assert not any(c.stale for c in await stores.list(tenant))

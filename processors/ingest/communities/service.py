"""Community-build processor: detects a collection's communities over its concept graph
(hierarchical Leiden, no model), profiles them and stores them, keeping the cached summaries of
communities whose membership did not change.

A build is of the whole collection, so builds are debounced: one runs at a time per collection
and the requests that arrive meanwhile share one next build (`Coalescer`); the loaders ask for one
after a load, never per batch (writes only flag the communities they touch as stale). A build
reads the graph (relation weights and mentions), then the vectors of a few chunks per community,
a page of communities at a time: never every chunk vector of the collection at once."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from processors.base.bus import Bus
from processors.base.processor import FlowContext, ServiceSpec
from processors.base.settings import RuntimeSettings, flow_params
from processors.ingest.communities.coalesce import Coalescer
from processors.ingest.communities.detect import CommunityParams, detect
from processors.ingest.communities.profiles import profile, set_vectors, vector_chunks
from processors.services.store_processor import StoreProcessor
from processors.stores.documents_protocol import CommunityRecord
from schemas.communities import BuildCommunities, CommunitiesResponse
from schemas.services import COMMUNITY_BUILD
from schemas.tenant import Tenant

if TYPE_CHECKING:
    from processors.stores.factory import Stores

VECTOR_PAGE = 1000  # communities whose chunk vectors are read at once (at most 10 chunks each)


class CommunityBuildProcessor(StoreProcessor):
    """Serves `community-build` (see the module docstring)."""

    name = COMMUNITY_BUILD.name

    def __init__(self, bus: Bus, runtime: RuntimeSettings, stores: Stores) -> None:
        super().__init__(bus, runtime, stores)
        self._builds: Coalescer[CommunitiesResponse] = Coalescer()

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(COMMUNITY_BUILD, self.build)]

    async def on_flow_start(self, flow: FlowContext) -> None:
        flow.state = flow_params(CommunityParams, flow.parameters)

    async def build(self, req: BuildCommunities, flow: FlowContext) -> CommunitiesResponse:
        """Detect, profile and store the collection's communities (a build already queued for the
        collection answers this request too)."""
        params: CommunityParams = flow.state
        return await self._builds.run((req.user, req.collection), lambda: self._build(req.tenant, params))

    async def _build(self, tenant: Tenant, params: CommunityParams) -> CommunitiesResponse:
        started = time.perf_counter()
        graph = await self.stores.communities.graph(tenant)
        found = await asyncio.to_thread(detect, graph.edges, params)
        records = await asyncio.to_thread(profile, found, graph.mentions, graph.edges)
        del graph
        await self._profile_vectors(tenant, records)
        await self.stores.communities.replace(tenant, records)
        levels: dict[int, int] = {}
        for r in records:
            levels[r.level] = levels.get(r.level, 0) + 1
        return CommunitiesResponse(levels=levels, build_ms=round((time.perf_counter() - started) * 1000, 1))

    async def _profile_vectors(self, tenant: Tenant, records: list[CommunityRecord]) -> None:
        """Each community's profile vector, from its chunks' vectors read a page of communities at a time."""
        for at in range(0, len(records), VECTOR_PAGE):
            page = records[at : at + VECTOR_PAGE]
            ids = sorted({cid for r in page for cid in vector_chunks(r)})
            set_vectors(page, await self.stores.communities.chunk_vectors(tenant, ids))

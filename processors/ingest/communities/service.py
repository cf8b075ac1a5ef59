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
from processors.ingest.communities.detect import CommunityParams, hierarchy
from processors.ingest.communities.profiles import Profiles
from processors.services.store_processor import StoreProcessor
from schemas.communities import BuildCommunities, CommunitiesResponse
from schemas.services import COMMUNITY_BUILD
from schemas.tenant import Tenant

if TYPE_CHECKING:
    from processors.stores.factory import Stores


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
        found = await asyncio.to_thread(hierarchy, graph, params)
        profiles = await asyncio.to_thread(Profiles, found, graph)
        del graph
        await self.stores.communities.replace(tenant, (r for page in profiles.pages() for r in page))
        levels = {level: len(ids) for level, ids in enumerate(found.ids)}
        return CommunitiesResponse(levels=levels, build_ms=round((time.perf_counter() - started) * 1000, 1))

"""Community-build processor: detects a collection's communities over its concept graph
(hierarchical Leiden, no model), profiles them and stores them, keeping the cached summaries of
communities whose membership did not change.

A build is of the whole collection, so builds are debounced: one runs at a time per collection
and the requests that arrive meanwhile share one next build (`Coalescer`); the loaders ask for one
after a load, never per batch (writes only flag the communities they touch as stale). A build
reads the graph as arrays (relation weights and mentions) and clusters it; the store writes the
communities a page at a time as their records are made, reading a few chunk vectors per
community: never every chunk vector, nor every community's record, at once. An update (`update`
in the request) re-clusters only the stale level-0 communities and the pending concepts over the
subgraph they induce (update.py states the rule and its limits)."""

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
from processors.ingest.communities.update import recluster
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
        """Detect, profile and store the collection's communities, or with `update` re-cluster only
        what writes flagged stale since (a run of the same kind already queued for the collection
        answers this request too)."""
        params: CommunityParams = flow.state
        key, tenant = (req.user, req.collection), req.tenant
        if req.update:
            return await self._builds.run(key, lambda: self._update(tenant, params), "update")
        return await self._builds.run(key, lambda: self._build(tenant, params))

    async def _build(self, tenant: Tenant, params: CommunityParams) -> CommunitiesResponse:
        started = time.perf_counter()
        graph = await self.stores.communities.graph(tenant)
        found = await asyncio.to_thread(hierarchy, graph, params)
        profiles = await asyncio.to_thread(Profiles, found, graph)
        del graph
        await self.stores.communities.replace(tenant, (r for page in profiles.pages() for r in page))
        levels = {level: len(ids) for level, ids in enumerate(found.ids)}
        return CommunitiesResponse(levels=levels, build_ms=round((time.perf_counter() - started) * 1000, 1))

    async def _update(self, tenant: Tenant, params: CommunityParams) -> CommunitiesResponse:
        """Re-cluster the stale level-0 communities and the pending concepts (update.py); a
        collection without communities is built whole."""
        started = time.perf_counter()
        stale = await self.stores.communities.stale(tenant)
        if stale is None:
            return await self._build(tenant, params)
        levels = {}
        if touched := stale.touched():
            graph = await self.stores.communities.graph(tenant, touched)
            change = await asyncio.to_thread(recluster, stale, graph, params)
            await self.stores.communities.update(tenant, change)
            levels[0] = len(change.added)
        return CommunitiesResponse(levels=levels, build_ms=round((time.perf_counter() - started) * 1000, 1))

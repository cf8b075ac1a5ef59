"""Community-build processor: detects a collection's communities over its concept graph
(hierarchical Leiden, no model), profiles them and stores them, keeping the cached summaries of
communities whose membership did not change."""

from __future__ import annotations

import asyncio
import time

from processors.base.processor import FlowContext, ServiceSpec, StoreProcessor
from processors.base.settings import flow_params
from processors.ingest.communities.detect import CommunityParams, detect
from processors.ingest.communities.profiles import profile
from schemas.communities import BuildCommunities, CommunitiesResponse
from schemas.services import COMMUNITY_BUILD


class CommunityBuildProcessor(StoreProcessor):
    """Serves `community-build` (see the module docstring)."""

    name = COMMUNITY_BUILD.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(COMMUNITY_BUILD, self.build)]

    async def on_flow_start(self, flow: FlowContext) -> None:
        flow.state = flow_params(CommunityParams, flow.parameters)

    async def build(self, req: BuildCommunities, flow: FlowContext) -> CommunitiesResponse:
        """Detect, profile and store the collection's communities."""
        params: CommunityParams = flow.state
        started = time.perf_counter()
        edges, mentions, vectors = await self.stores.communities.graph(req.user, req.collection)
        found = await asyncio.to_thread(detect, edges, params)
        records = await asyncio.to_thread(profile, found, mentions, edges, vectors)
        await self.stores.communities.replace(req.user, req.collection, records)
        levels: dict[int, int] = {}
        for r in records:
            levels[r.level] = levels.get(r.level, 0) + 1
        return CommunitiesResponse(levels=levels, build_ms=round((time.perf_counter() - started) * 1000, 1))

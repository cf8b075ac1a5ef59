"""A stage whose service does not answer ends the graph-rag query with a typed `timeout` error."""

from __future__ import annotations

from pathlib import Path

import pytest

from processors.base.client import RemoteError, RequestResponseClient
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.topics import topic


async def test_silent_stage_is_a_timeout_error(tmp_path: Path) -> None:
    async with embedded(StoreSettings(home=tmp_path), flow_params={"stage-timeout-s": 0.3}) as system:
        await system.processor("embeddings").stop_flow("default")  # the first stage goes silent
        rag = RequestResponseClient(
            system.bus, topic("graph-rag", "default"), topic("graph-rag", "default", "response"), GraphRagResponse, 10
        )
        with pytest.raises(RemoteError) as e:
            await rag.request(GraphRagRequest(query="anything", user="u", collection="c", no_llm=True))
        assert e.value.type == "timeout" and "embeddings did not answer" in e.value.message  # the stage timeout
        await rag.stop()

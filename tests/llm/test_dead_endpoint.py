"""A dead model endpoint fails fast and says so by name: a refused or dropped connection is tried
twice, then the endpoint is marked down for a while (later calls fail at once, without
connecting); a service whose model call failed answers with the model's error type
(`llm-unavailable`), never `internal-error`, and is not redelivered to try the dead model again.
Counted at a real loopback TCP server that accepts and closes every connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from processors.base.client import RemoteError, RequestResponseClient
from processors.base.wire import error_response
from processors.commands.system import embedded
from processors.models.text_completion.backend import ChatMessage, CompletionOptions, LLMError
from processors.models.text_completion.openai_backend import OpenAIBackend
from processors.stores.settings import StoreSettings
from schemas.documents import Document, LoadDocuments
from schemas.lazy_rag import LazyRagRequest, LazyRagResponse
from schemas.services import DOCUMENT_LOAD, LAZY_RAG

QUESTION = [ChatMessage("user", "hi")]


class DeadEndpoint:
    """Accepts TCP connections and closes them at once, counting them."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def _drop(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._drop, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
async def dead() -> AsyncIterator[tuple[DeadEndpoint, str]]:
    endpoint = DeadEndpoint()
    url = await endpoint.start()
    yield endpoint, url
    assert endpoint.server is not None
    endpoint.server.close()


async def test_a_dead_endpoint_is_tried_twice_then_marked_down(dead: tuple[DeadEndpoint, str]) -> None:
    endpoint, url = dead
    backend = OpenAIBackend("m", url)  # the default retries: 4 for answers the endpoint gives
    try:
        with pytest.raises(LLMError) as first:
            await backend.complete(QUESTION, CompletionOptions(timeout_s=60))
        assert first.value.type == "llm-unavailable" and endpoint.connections == 2
        with pytest.raises(LLMError) as again:
            await backend.complete(QUESTION, CompletionOptions(timeout_s=60))
        assert again.value.type == "llm-unavailable" and "unreachable" in again.value.message
        assert endpoint.connections == 2  # marked down: not tried again
    finally:
        await backend.close()


def test_a_downstream_error_keeps_its_type() -> None:
    res = error_response(LazyRagResponse, RemoteError("llm-unavailable", "cannot reach the model endpoint"))
    assert res.error is not None and res.error.type == "llm-unavailable"


async def test_lazy_rag_over_a_dead_model_warns_llm_unavailable(tmp_path: Path, dead: tuple[DeadEndpoint, str]) -> None:
    endpoint, url = dead
    params = {"llm": "openai", "llm-model": "m", "llm-base-url": url}
    async with embedded(StoreSettings(home=tmp_path / "home"), flow_params=params) as system:
        load = RequestResponseClient.for_service(system.bus, DOCUMENT_LOAD, "default", 120)
        ask = RequestResponseClient.for_service(system.bus, LAZY_RAG, "default", 120)
        try:
            doc = Document(id="curie", title="Marie Curie", text="Marie Curie named polonium after Poland.")
            await load.request(LoadDocuments(user="u", collection="c", documents=[doc]))
            res: LazyRagResponse = await ask.request(
                LazyRagRequest(user="u", collection="c", query="What did Marie Curie name after Poland?")
            )
        finally:
            await load.stop()
            await ask.stop()
    types = {w.type for w in res.warnings}
    assert "llm-unavailable" in types and "internal-error" not in " ".join(w.message for w in res.warnings)
    assert endpoint.connections <= 2  # the summaries and the answer do not each try the dead model again
    assert res.chunks and res.chunks[0].document_id == "curie"  # retrieval still answers

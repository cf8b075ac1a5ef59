"""Document-load processor: runs a batch of documents through the documents flow — chunk,
embed (`embeddings`), extract concepts (`extractor`), link and store (`documents`) — streaming
progress. Every step is a bus call, so each scales on its own processors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from processors.base.client import RemoteError
from processors.base.errors import ServiceError
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.ingest.documents.chunker import ChunkingParams
from processors.ingest.documents.pipeline import LoadReport, load_batch
from processors.models.embeddings.client import FlowEmbedder
from processors.models.embeddings.model import plain_tokenizer
from schemas.documents import (
    DocumentStatus,
    FailedDocument,
    IndexedDocument,
    LoadDocuments,
    LoadResponse,
    StoreDocuments,
)
from schemas.extraction import ConceptMention, ExtractRequest
from schemas.services import DOCUMENT_LOAD, DOCUMENTS, EMBEDDINGS, EXTRACTOR, Service

_tokenizer: Any = None
_tokenizer_lock = threading.Lock()


def _shared_tokenizer() -> Any:
    global _tokenizer
    with _tokenizer_lock:
        if _tokenizer is None:
            _tokenizer = plain_tokenizer()
    return _tokenizer


class BusIngest:
    """IngestSources over the flow's clients, for one user + collection."""

    def __init__(self, flow: FlowContext, user: str, collection: str) -> None:
        self.flow, self.user, self.collection = flow, user, collection

    async def hashes(self, ids: list[str]) -> dict[str, str]:
        req = DocumentStatus(user=self.user, collection=self.collection, document_ids=ids)
        return (await self.flow.client(DOCUMENTS).request(req)).hashes

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await FlowEmbedder(self.flow.client(EMBEDDINGS)).embed(texts)

    async def extract(self, texts: list[str]) -> list[list[ConceptMention]]:
        return (await self.flow.client(EXTRACTOR).request(ExtractRequest(texts=texts))).mentions

    async def store(self, documents: list[IndexedDocument]) -> None:
        req = StoreDocuments(user=self.user, collection=self.collection, documents=documents)
        await self.flow.client(DOCUMENTS).request(req)


class DocumentLoadProcessor(FlowProcessor):
    """Serves `document-load`."""

    name = DOCUMENT_LOAD.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(DOCUMENT_LOAD, self.load)]

    def calls(self) -> list[Service]:
        return [DOCUMENTS, EMBEDDINGS, EXTRACTOR]

    async def on_flow_start(self, flow: FlowContext) -> None:
        flow.state = flow_params(ChunkingParams, flow.parameters)

    async def load(self, req: LoadDocuments, flow: FlowContext) -> AsyncIterator[LoadResponse]:
        """Progress steps, then the batch's report."""
        steps: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        tokenizer = await asyncio.to_thread(_shared_tokenizer)
        sources = BusIngest(flow, req.user, req.collection)
        task = asyncio.create_task(
            load_batch(sources, req.documents, tokenizer, flow.state, lambda st, n: steps.put_nowait((st, n)))
        )
        try:
            while not task.done() or not steps.empty():
                step = asyncio.ensure_future(steps.get())
                await asyncio.wait({task, step}, return_when=asyncio.FIRST_COMPLETED)
                if step.done():
                    stage, n = step.result()
                    yield LoadResponse(stage=stage, done=n, end_of_stream=False)
                else:
                    step.cancel()
            report: LoadReport = task.result()
        except RemoteError as e:
            raise ServiceError(e.type, f"loading failed: {e.message}") from None
        finally:
            task.cancel()
        yield LoadResponse(
            loaded=report.loaded,
            unchanged=report.unchanged,
            failed=[FailedDocument(id=i, error=m) for i, m in report.failed.items()],
            chunks=report.chunks,
            mentions=report.mentions,
            cooccurrences=report.cooccurrences,
        )

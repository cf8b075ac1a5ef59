"""Document-load processor: runs a batch of documents through the documents flow — chunk,
embed (`embeddings`), extract concepts (`extractor`), with `extractor: llm` typed relations
(`text-completion`, one call per chunk), link and store (`document-store`) — streaming progress.
Every step is a bus call, so each scales on its own processors; the CPU work done here (chunking,
building what is stored) runs in the process's indexing worker (processors/base/offload.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from processors.base.client import RemoteError, RequestTimeout
from processors.base.errors import ServiceError
from processors.base.offload import shared_offload
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.ingest.documents.llm_relations import NEEDS_MODEL, ExtractorNeedsModel, ModelCallFailed
from processors.ingest.documents.params import DocumentLoadParams
from processors.ingest.documents.pipeline import CollectionDeleted, LoadReport, load_batch
from processors.models.embeddings.client import FlowEmbedder
from processors.models.text_completion.prompting import ModelAnswer
from schemas.base import COLLECTION_DELETED
from schemas.documents import (
    DocumentsResponse,
    DocumentStatus,
    FailedDocument,
    IndexedDocument,
    LoadDocuments,
    LoadResponse,
    StoreDocuments,
    WriteMark,
)
from schemas.extraction import ConceptMention, ExtractRequest
from schemas.services import DOCUMENT_LOAD, DOCUMENT_STORE, DOCUMENTS, EMBEDDINGS, EXTRACTOR, TEXT_COMPLETION, Service
from schemas.tenant import Tenant
from schemas.text_completion import TextCompletionRequest

LLM_CONFIG = "llm-config"  # text-completion's error type for a model it cannot build


class BusIngest:
    """IngestSources over the flow's clients, for one user + collection and one load's `stamp`
    (the collection's write stamp when the load began: every write carries it, so a delete after
    it wins; None: the one `begin` takes)."""

    def __init__(
        self, flow: FlowContext, tenant: Tenant, stamp: float | None = None, model_timeout_s: float = 300.0
    ) -> None:
        self.flow, self.user, self.collection = flow, tenant.user, tenant.collection
        self.model_timeout_s = model_timeout_s
        self.started: float | None = None  # the mark `begin` set
        self.stamp = stamp

    async def hashes(self, ids: list[str]) -> dict[str, str]:
        req = DocumentStatus(user=self.user, collection=self.collection, document_ids=ids)
        return (await self.flow.client(DOCUMENTS).request(req)).hashes

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await FlowEmbedder(self.flow.client(EMBEDDINGS)).embed(texts)

    async def extract(self, texts: list[str]) -> list[list[ConceptMention]]:
        return (await self.flow.client(EXTRACTOR).request(ExtractRequest(texts=texts))).mentions

    async def begin(self) -> None:
        req = WriteMark(user=self.user, collection=self.collection, stamp=self.stamp)
        res = await self._write(req)
        self.started, self.stamp = res.started, res.stamp

    async def finish(self) -> None:
        if self.started is not None:
            req = WriteMark(user=self.user, collection=self.collection, finish=self.started)
            await self.flow.client(DOCUMENT_STORE).request(req)

    async def store(self, documents: list[IndexedDocument]) -> list[str]:
        req = StoreDocuments(user=self.user, collection=self.collection, documents=documents, started=self.started,
                             stamp=self.stamp)  # fmt: skip
        return (await self._write(req)).withdrawn

    async def _write(self, req: WriteMark | StoreDocuments) -> DocumentsResponse:
        """A document-store request; its refusal because the collection was deleted stops the load."""
        try:
            return await self.flow.client(DOCUMENT_STORE).request(req)
        except RemoteError as e:
            if e.type == COLLECTION_DELETED:
                raise CollectionDeleted(e.message) from None
            raise

    async def complete(self, system: str, prompt: str, json_schema: dict[str, Any], max_tokens: int) -> ModelAnswer:
        req = TextCompletionRequest(system=system, prompt=prompt, json_schema=json_schema, max_tokens=max_tokens)
        try:
            res = await self.flow.client(TEXT_COMPLETION).request(req, timeout_s=self.model_timeout_s)
        except RequestTimeout:
            raise ModelCallFailed(f"no answer within {self.model_timeout_s:g}s") from None
        except RemoteError as e:
            if e.type == LLM_CONFIG:
                raise ExtractorNeedsModel(f"{NEEDS_MODEL} ({e.message})") from None
            raise ModelCallFailed(f"model error {e.type}") from None
        return ModelAnswer(res.response, res.model or "", res.in_token or 0, res.out_token or 0, res.configured)


class DocumentLoadProcessor(FlowProcessor):
    """Serves `document-load`."""

    name = DOCUMENT_LOAD.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(DOCUMENT_LOAD, self.load)]

    def calls(self) -> list[Service]:
        return [DOCUMENTS, DOCUMENT_STORE, EMBEDDINGS, EXTRACTOR, TEXT_COMPLETION]

    async def on_flow_start(self, flow: FlowContext) -> None:
        flow.state = flow_params(DocumentLoadParams, flow.parameters)

    async def load(self, req: LoadDocuments, flow: FlowContext) -> AsyncIterator[LoadResponse]:
        """Progress steps, then the batch's report."""
        steps: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        params: DocumentLoadParams = flow.state
        sources = BusIngest(flow, req.tenant, req.stamp, params.extractor_timeout_s)
        offload = shared_offload(self.runtime.indexing_processes, self.runtime.blas_threads)
        task = asyncio.create_task(
            load_batch(sources, req.documents, None, params, lambda st, n: steps.put_nowait((st, n)), offload)
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
        except ExtractorNeedsModel as e:
            raise ServiceError(LLM_CONFIG, f"loading failed: {e}") from None
        except CollectionDeleted as e:
            raise ServiceError(COLLECTION_DELETED, str(e)) from None
        finally:
            task.cancel()
        yield LoadResponse(
            loaded=report.loaded,
            unchanged=report.unchanged,
            failed=[FailedDocument(id=i, error=m) for i, m in report.failed.items()],
            chunks=report.chunks,
            mentions=report.mentions,
            cooccurrences=report.cooccurrences,
            relations=report.relations,
            llm_calls=report.llm_calls,
            warnings=report.warnings,
        )

"""Extractor processor: the concepts of chunk texts from a spaCy pipeline (no model calls).

The pipeline is loaded once per process, on first use, and runs in one worker thread (parsing is
CPU work: the event loop stays free). On Pulsar, more extractor instances share the request
topic, which is how a deployment scales indexing.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.ingest.extractor.concepts import PIPELINE_PACKAGE, doc_concepts, load_pipeline
from schemas.extraction import ConceptMention, ExtractRequest, ExtractResponse
from schemas.services import EXTRACTOR

PIPE_BATCH = 64


class _Pipeline:
    """The process's spaCy pipeline and the one thread that runs it."""

    _nlp: Any = None
    _lock = threading.Lock()
    _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="extract")

    @classmethod
    def run(cls, texts: list[str]) -> list[list[ConceptMention]]:
        with cls._lock:
            if cls._nlp is None:
                cls._nlp = load_pipeline()
        return [
            [
                ConceptMention(
                    key=c.key,
                    label=c.label,
                    sentence=c.sentence,
                    kind=c.kind,
                    subject=c.subject,
                    aliases=list(c.aliases),
                )
                for c in doc_concepts(doc)
            ]  # fmt: skip
            for doc in cls._nlp.pipe(texts, batch_size=PIPE_BATCH)
        ]


class ExtractorProcessor(FlowProcessor):
    """Serves `extractor`."""

    name = EXTRACTOR.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(EXTRACTOR, self.extract)]

    async def extract(self, req: ExtractRequest, flow: FlowContext) -> ExtractResponse:
        """Concepts of each text, in order."""
        loop = asyncio.get_running_loop()
        mentions = await loop.run_in_executor(_Pipeline._pool, _Pipeline.run, req.texts)
        return ExtractResponse(mentions=mentions, extractor=PIPELINE_PACKAGE)

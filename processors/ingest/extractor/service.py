"""Extractor processor: the concepts of chunk texts from a spaCy pipeline (no model calls).

Parsing is CPU work that holds the GIL: chunks are parsed in the process's indexing worker
(processors/base/offload.py), which loads the pipeline once, on first use; the event loop stays
free. A question's text is parsed here, in a thread. On Pulsar, more extractor instances share
the request topic, which is how a deployment scales indexing.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from processors.base.offload import shared_offload
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.ingest.extractor.concepts import PIPELINE_PACKAGE, doc_concepts, load_pipeline
from schemas.extraction import ConceptMention, ExtractRequest, ExtractResponse
from schemas.services import EXTRACTOR

PIPE_BATCH = 64
# One text this short is a question's (lazy-rag, kg-query, drift): parsed in this process, in
# milliseconds, never queued behind a batch of chunks in the indexing worker (nor spawning one).
QUESTION_CHARS = 1_000


class _Pipeline:
    """The process's spaCy pipeline, loaded once."""

    _nlp: Any = None
    _lock = threading.Lock()

    @classmethod
    def run(cls, texts: list[str]) -> list[list[ConceptMention]]:
        from threadpoolctl import threadpool_limits

        # One BLAS thread: the pipeline's products are small, a second thread spins more than it
        # helps (41% more CPU for the same parse measured), and a parse is one core's work anyway.
        with cls._lock, threadpool_limits(limits=1, user_api="blas"):
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


def extract_texts(texts: list[str]) -> list[list[ConceptMention]]:
    """The concepts of each text, in order (what an indexing worker runs)."""
    return _Pipeline.run(texts)


class ExtractorProcessor(FlowProcessor):
    """Serves `extractor`."""

    name = EXTRACTOR.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(EXTRACTOR, self.extract)]

    async def extract(self, req: ExtractRequest, flow: FlowContext) -> ExtractResponse:
        """Concepts of each text, in order."""
        if len(req.texts) == 1 and len(req.texts[0]) <= QUESTION_CHARS:
            mentions = await asyncio.to_thread(extract_texts, req.texts)
        else:
            offload = shared_offload(self.runtime.indexing_processes, self.runtime.blas_threads)
            mentions = await offload.run(f"extracting concepts from {len(req.texts)} texts", extract_texts, req.texts)
        return ExtractResponse(mentions=mentions, extractor=PIPELINE_PACKAGE)

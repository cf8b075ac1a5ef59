"""Flow parameters of document-load: chunking, and which extractor finds relations."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from processors.ingest.documents.chunker import ChunkingParams


class DocumentLoadParams(ChunkingParams):
    """`extractor`: `concepts` (the default: spaCy concepts and sentence co-occurrence, no model
    call) or `llm` (the same, plus one text-completion call per chunk for typed relations);
    `extractor-concurrency` model calls in flight per load; `extractor-timeout-s` per call."""

    extractor: Literal["concepts", "llm"] = "concepts"
    extractor_concurrency: int = Field(default=4, ge=1, le=64)
    extractor_timeout_s: float = Field(default=300.0, gt=0, le=3600)

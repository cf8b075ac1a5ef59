"""Embeddings processor: serves `embeddings` requests with the flow's embedding model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.models.embeddings.backends import make_embedder
from processors.models.embeddings.model import Embedder
from schemas.embeddings import EmbeddingsRequest, EmbeddingsResponse
from schemas.services import EMBEDDINGS


class EmbeddingsParams(BaseModel):
    """Flow parameters of the embeddings processor."""

    embeddings_backend: Literal["local", "bge-small", "openai"] = "local"
    embeddings_model: str | None = None
    embeddings_base_url: str | None = None
    embeddings_api_key: str | None = None
    # Tokens one request may cost (a local text costs at most 256): bounds the work any one client
    # can make; 8192 is 32 texts of the longest kind, a few seconds of one core.
    embeddings_max_tokens: int = Field(default=8192, ge=512)


BULK_BYTES = 16384  # a request bigger than this (many or long texts) is bulk work: it never delays a question


@dataclass
class FlowEmbeddings:
    """A flow's embedder and its per-request token budget."""

    embedder: Embedder
    max_tokens: int


class EmbeddingsProcessor(FlowProcessor):
    """Texts in, unit vectors out."""

    name = EMBEDDINGS.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(EMBEDDINGS, self.embed, bulk_bytes=BULK_BYTES)]

    async def on_flow_start(self, flow: FlowContext[FlowEmbeddings]) -> None:
        p = flow_params(EmbeddingsParams, flow.parameters)
        embedder = make_embedder(p.embeddings_backend, p.embeddings_model, p.embeddings_base_url, p.embeddings_api_key)
        flow.state = FlowEmbeddings(embedder, p.embeddings_max_tokens)

    async def embed(self, req: EmbeddingsRequest, flow: FlowContext[FlowEmbeddings]) -> EmbeddingsResponse:
        """Embed the request's texts (refused, unembedded, beyond the flow's token budget)."""
        state = flow.state
        vectors = await state.embedder.embed(req.texts, state.max_tokens, req.query)
        return EmbeddingsResponse(vectors=vectors, model=state.embedder.model)

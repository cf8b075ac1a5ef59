"""Embeddings processor: serves `embeddings` requests with the flow's embedding model."""

from __future__ import annotations

from pydantic import BaseModel

from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.models.embeddings.model import make_embedder
from schemas.embeddings import EmbeddingsRequest, EmbeddingsResponse
from schemas.services import EMBEDDINGS


class EmbeddingsParams(BaseModel):
    """Flow parameters of the embeddings processor."""

    embeddings_backend: str = "local"
    embeddings_model: str | None = None
    embeddings_base_url: str | None = None
    embeddings_api_key: str | None = None


class EmbeddingsProcessor(FlowProcessor):
    """Texts in, unit vectors out."""

    name = EMBEDDINGS.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(EMBEDDINGS, self.embed)]

    async def on_flow_start(self, flow: FlowContext) -> None:
        p = flow_params(EmbeddingsParams, flow.parameters)
        flow.state = make_embedder(
            p.embeddings_backend, p.embeddings_model, p.embeddings_base_url, p.embeddings_api_key
        )

    async def embed(self, req: EmbeddingsRequest, flow: FlowContext) -> EmbeddingsResponse:
        """Embed the request's texts."""
        return EmbeddingsResponse(vectors=await flow.state.embed(req.texts))

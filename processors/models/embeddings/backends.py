"""The embeddings backend a flow names (`embeddings-backend`), made from its parameters."""

from __future__ import annotations

from processors.models.embeddings.bge import OnnxBgeSmall
from processors.models.embeddings.model import Embedder, OnnxMiniLM, OpenAIEmbedder


def make_embedder(
    backend: str = "local", model: str | None = None, base_url: str | None = None, api_key: str | None = None
) -> Embedder:
    """The embedder a flow's parameters ask for."""
    if backend == "local":
        return OnnxMiniLM.shared()
    if backend == "bge-small":
        return OnnxBgeSmall.shared()
    if backend == "openai":
        if not model:
            raise ValueError("the openai embeddings backend needs a model name (embeddings-model)")
        return OpenAIEmbedder(model, base_url, api_key)
    raise ValueError(f"unknown embeddings backend {backend!r} (local|bge-small|openai)")

"""The table of flow services: each service's name and its request/response contract.

Processors serve and call services by these entries, the gateway routes by them and the CLI
finds a service's knobs through them, so a service name is written once, here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from schemas.base import Response
from schemas.communities import BuildCommunities, CommunitiesRequest, CommunitiesResponse
from schemas.documents import DocumentsRequest, DocumentsResponse, DocumentStoreRequest, LoadDocuments, LoadResponse
from schemas.drift import DriftParams, DriftRequest, DriftResponse
from schemas.embeddings import EmbeddingsRequest, EmbeddingsResponse
from schemas.extraction import ExtractRequest, ExtractResponse
from schemas.graph_embeddings import GraphEmbeddingsRequest, GraphEmbeddingsResponse
from schemas.graph_rag import GraphRagParams, GraphRagRequest, GraphRagResponse
from schemas.kg_query import KgQueryParams, KgQueryRequest, KgQueryResponse
from schemas.labels import LabelRequest, LabelResponse
from schemas.lazy_rag import LazyRagParams, LazyRagRequest, LazyRagResponse
from schemas.reranker import RerankerParams, RerankRequest, RerankResponse
from schemas.text_completion import TextCompletionRequest, TextCompletionResponse
from schemas.triples import TriplesRequest, TriplesResponse, TriplesStoreRequest, TriplesStoreResponse


@dataclass(frozen=True)
class Service:
    """A flow service: its topic name, request model (or RootModel union) and response model.

    `params` holds the knobs a request may set over the flow's parameters (None: no knobs).
    """

    name: str
    request: Any
    response: type[Response]
    params: type[BaseModel] | None = None

    def param_names(self) -> list[str]:
        """The knobs by their gateway/CLI names (kebab-case)."""
        return [f.replace("_", "-") for f in (self.params.model_fields if self.params else ())]


EMBEDDINGS = Service("embeddings", EmbeddingsRequest, EmbeddingsResponse)
GRAPH_EMBEDDINGS = Service("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse)
TRIPLES = Service("triples", TriplesRequest, TriplesResponse)
TRIPLES_STORE = Service("triples-store", TriplesStoreRequest, TriplesStoreResponse)
LABEL_RESOLVER = Service("label-resolver", LabelRequest, LabelResponse)
TEXT_COMPLETION = Service("text-completion", TextCompletionRequest, TextCompletionResponse)
GRAPH_RAG = Service("graph-rag", GraphRagRequest, GraphRagResponse, GraphRagParams)
DOCUMENTS = Service("documents", DocumentsRequest, DocumentsResponse)
DOCUMENT_STORE = Service("document-store", DocumentStoreRequest, DocumentsResponse)
EXTRACTOR = Service("extractor", ExtractRequest, ExtractResponse)
DOCUMENT_LOAD = Service("document-load", LoadDocuments, LoadResponse)
COMMUNITIES = Service("communities", CommunitiesRequest, CommunitiesResponse)
COMMUNITY_BUILD = Service("community-build", BuildCommunities, CommunitiesResponse)
LAZY_RAG = Service("lazy-rag", LazyRagRequest, LazyRagResponse, LazyRagParams)
KG_QUERY = Service("kg-query", KgQueryRequest, KgQueryResponse, KgQueryParams)
DRIFT = Service("drift", DriftRequest, DriftResponse, DriftParams)
RERANKER = Service("reranker", RerankRequest, RerankResponse, RerankerParams)

SERVICES: dict[str, Service] = {
    s.name: s
    for s in (
        EMBEDDINGS,
        GRAPH_EMBEDDINGS,
        TRIPLES,
        TRIPLES_STORE,
        LABEL_RESOLVER,
        TEXT_COMPLETION,
        GRAPH_RAG,
        DOCUMENTS,
        DOCUMENT_STORE,
        EXTRACTOR,
        DOCUMENT_LOAD,
        COMMUNITIES,
        COMMUNITY_BUILD,
        LAZY_RAG,
        KG_QUERY,
        DRIFT,
        RERANKER,
    )
}

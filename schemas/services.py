"""The table of flow services: each service's name and its request/response contract.

Processors serve and call services by these entries, the gateway routes by them and the CLI
finds a service's knobs through them, so a service name is written once, here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

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

Req = TypeVar("Req", bound=BaseModel, covariant=True)
Resp = TypeVar("Resp", bound=Response, covariant=True)


@dataclass(frozen=True)
class Service(Generic[Req, Resp]):
    """A flow service: its topic name, request model and response model, so a call's response type
    is known where it is made (`RequestResponseClient[Resp]`).

    `request` is the model a request is validated against; for a service of several operations it
    is a RootModel over their union, and `Req` is `BaseModel` (each operation is its own model).
    `params` holds the knobs a request may set over the flow's parameters (None: no knobs).
    """

    name: str
    request: type[BaseModel]
    response: type[Resp]
    params: type[BaseModel] | None = None

    def param_names(self) -> list[str]:
        """The knobs by their gateway/CLI names (kebab-case)."""
        return [f.replace("_", "-") for f in (self.params.model_fields if self.params else ())]


# Any service (the table, the gateway's routing): its request and response types are not known here.
AnyService = Service[BaseModel, Response]

EMBEDDINGS = Service[EmbeddingsRequest, EmbeddingsResponse]("embeddings", EmbeddingsRequest, EmbeddingsResponse)
GRAPH_EMBEDDINGS = Service[GraphEmbeddingsRequest, GraphEmbeddingsResponse](
    "graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse
)
TRIPLES = Service[BaseModel, TriplesResponse]("triples", TriplesRequest, TriplesResponse)
TRIPLES_STORE = Service[BaseModel, TriplesStoreResponse]("triples-store", TriplesStoreRequest, TriplesStoreResponse)
LABEL_RESOLVER = Service[LabelRequest, LabelResponse]("label-resolver", LabelRequest, LabelResponse)
TEXT_COMPLETION = Service[TextCompletionRequest, TextCompletionResponse](
    "text-completion", TextCompletionRequest, TextCompletionResponse
)
GRAPH_RAG = Service[GraphRagRequest, GraphRagResponse]("graph-rag", GraphRagRequest, GraphRagResponse, GraphRagParams)
DOCUMENTS = Service[BaseModel, DocumentsResponse]("documents", DocumentsRequest, DocumentsResponse)
DOCUMENT_STORE = Service[BaseModel, DocumentsResponse]("document-store", DocumentStoreRequest, DocumentsResponse)
EXTRACTOR = Service[ExtractRequest, ExtractResponse]("extractor", ExtractRequest, ExtractResponse)
DOCUMENT_LOAD = Service[LoadDocuments, LoadResponse]("document-load", LoadDocuments, LoadResponse)
COMMUNITIES = Service[BaseModel, CommunitiesResponse]("communities", CommunitiesRequest, CommunitiesResponse)
COMMUNITY_BUILD = Service[BuildCommunities, CommunitiesResponse](
    "community-build", BuildCommunities, CommunitiesResponse
)
LAZY_RAG = Service[LazyRagRequest, LazyRagResponse]("lazy-rag", LazyRagRequest, LazyRagResponse, LazyRagParams)
KG_QUERY = Service[KgQueryRequest, KgQueryResponse]("kg-query", KgQueryRequest, KgQueryResponse, KgQueryParams)
DRIFT = Service[DriftRequest, DriftResponse]("drift", DriftRequest, DriftResponse, DriftParams)
RERANKER = Service[RerankRequest, RerankResponse]("reranker", RerankRequest, RerankResponse, RerankerParams)

SERVICES: dict[str, AnyService] = {
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

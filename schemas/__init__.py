"""kgflow wire contracts: pydantic models for every message, terms and topic names."""

from schemas.base import SCHEMA_VERSION, Error, Message, Notice, Response, ScopedRequest
from schemas.embeddings import EmbeddingsRequest, EmbeddingsResponse
from schemas.flows import (
    Blueprint,
    ConfigState,
    Flow,
    FlowRequest,
    FlowResponse,
    GraphChanged,
    ProcessorBinding,
)
from schemas.graph_embeddings import EntityMatch, GraphEmbeddingsRequest, GraphEmbeddingsResponse
from schemas.graph_rag import GraphRagRequest, GraphRagResponse, GraphRagStats, SeedEntity
from schemas.labels import LabelRequest, LabelResponse
from schemas.terms import RDFS_LABEL, LabelledTriple, Term, Triple
from schemas.text_completion import TextCompletionRequest, TextCompletionResponse
from schemas.topics import topic
from schemas.triples import (
    LabelsQuery,
    NeighboursQuery,
    PatternQuery,
    ScoredTriple,
    StoreTriples,
    TriplesRequest,
    TriplesResponse,
)

__all__ = [
    "SCHEMA_VERSION",
    "RDFS_LABEL",
    "Blueprint",
    "ConfigState",
    "EmbeddingsRequest",
    "EmbeddingsResponse",
    "EntityMatch",
    "Error",
    "Flow",
    "FlowRequest",
    "FlowResponse",
    "GraphChanged",
    "GraphEmbeddingsRequest",
    "GraphEmbeddingsResponse",
    "GraphRagRequest",
    "GraphRagResponse",
    "GraphRagStats",
    "LabelRequest",
    "LabelResponse",
    "LabelledTriple",
    "LabelsQuery",
    "Message",
    "NeighboursQuery",
    "Notice",
    "PatternQuery",
    "ProcessorBinding",
    "Response",
    "ScopedRequest",
    "ScoredTriple",
    "StoreTriples",
    "SeedEntity",
    "Term",
    "TextCompletionRequest",
    "TextCompletionResponse",
    "Triple",
    "TriplesRequest",
    "TriplesResponse",
    "topic",
]

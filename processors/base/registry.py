"""The registry of processors: each processor's name, where its class lives, what it serves.

Classes are named by import path and imported only when built, so a process that runs one
processor loads only that processor's dependencies.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from schemas import services as sv
from schemas.services import Service


@dataclass(frozen=True)
class ProcessorEntry:
    """A processor: its name, its class as `module:Class`, and the flow services it serves."""

    name: str
    target: str
    serves: tuple[Service, ...] = ()
    params: str | None = None  # `module:Class` of its flow-parameter model (None: it takes none)

    def load(self) -> Any:
        """The processor class (its module imported now)."""
        return _import(self.target)

    def params_model(self) -> type[BaseModel] | None:
        """The model of the flow parameters this processor reads (its module imported now)."""
        return _import(self.params) if self.params else None


def _import(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


CONFIG = ProcessorEntry("config", "processors.base.flow_registry:ConfigService")
GATEWAY = ProcessorEntry("gateway", "processors.gateway.service:GatewayProcessor")


def _serving(service: Service, target: str, params: str | None = None) -> ProcessorEntry:
    """A processor named after the one service it serves."""
    return ProcessorEntry(service.name, target, (service,), params)


# The flow processors, in the order a system starts them (the config service first).
FLOW_PROCESSORS = (
    _serving(
        sv.EMBEDDINGS,
        "processors.models.embeddings.service:EmbeddingsProcessor",
        "processors.models.embeddings.service:EmbeddingsParams",
    ),
    _serving(sv.GRAPH_EMBEDDINGS, "processors.query.graph_embeddings.service:GraphEmbeddingsProcessor"),
    _serving(sv.TRIPLES, "processors.query.triples.service:TriplesProcessor"),
    _serving(sv.TRIPLES_STORE, "processors.ingest.triples.service:TriplesStoreProcessor"),
    _serving(
        sv.LABEL_RESOLVER,
        "processors.query.label_resolver.service:LabelResolverProcessor",
        "processors.query.label_resolver.service:LabelParams",
    ),
    _serving(
        sv.GRAPH_RAG,
        "processors.retrieval.graph_rag.service:GraphRagProcessor",
        "processors.retrieval.graph_rag.rag:GraphRagSettings",
    ),
    _serving(
        sv.TEXT_COMPLETION,
        "processors.models.text_completion.service:TextCompletionProcessor",
        "processors.models.text_completion.service:LLMParams",
    ),
    _serving(
        sv.DOCUMENTS,
        "processors.query.documents.service:DocumentsProcessor",
        "processors.algorithms.passage_rank:PassageRankParams",
    ),
    _serving(sv.DOCUMENT_STORE, "processors.ingest.document_store.service:DocumentStoreProcessor"),
    _serving(sv.EXTRACTOR, "processors.ingest.extractor.service:ExtractorProcessor"),
    _serving(
        sv.DOCUMENT_LOAD,
        "processors.ingest.documents.service:DocumentLoadProcessor",
        "processors.ingest.documents.params:DocumentLoadParams",
    ),
    _serving(
        sv.COMMUNITY_BUILD,
        "processors.ingest.communities.service:CommunityBuildProcessor",
        "processors.ingest.communities.detect:CommunityParams",
    ),
    _serving(sv.COMMUNITIES, "processors.query.communities.service:CommunitiesProcessor"),
    _serving(
        sv.LAZY_RAG,
        "processors.retrieval.lazy_rag.service:LazyRagProcessor",
        "processors.retrieval.lazy_rag.retrieve:LazyRagSettings",
    ),
    _serving(
        sv.KG_QUERY,
        "processors.retrieval.kg_query.service:KgQueryProcessor",
        "processors.retrieval.kg_query.query:KgQuerySettings",
    ),
    _serving(
        sv.DRIFT,
        "processors.retrieval.drift.service:DriftProcessor",
        "processors.retrieval.drift.settings:DriftSettings",
    ),
    _serving(
        sv.RERANKER,
        "processors.retrieval.reranker.service:RerankerProcessor",
        "processors.retrieval.reranker.rerank:RerankerSettings",
    ),
)
PROCESSORS: dict[str, ProcessorEntry] = {p.name: p for p in (CONFIG, *FLOW_PROCESSORS, GATEWAY)}


def processor_entry(name: str) -> ProcessorEntry:
    """The entry of processor `name` (a clear error naming the known ones)."""
    entry = PROCESSORS.get(name)
    if entry is None:
        raise ValueError(f"unknown processor {name!r}; known: {', '.join(PROCESSORS)}")
    return entry


def server_of(service: str) -> ProcessorEntry | None:
    """The processor that serves flow service `service` (None if no processor does)."""
    return next((p for p in PROCESSORS.values() if any(s.name == service for s in p.serves)), None)

"""The processors kgflow runs, in the order a system starts them (the config service first): each
one's class, the service it serves and its flow-parameter model, imported explicitly here at the
wiring level (the framework in `processors.base` reads entries; it names no processor). And the
services' own prompts, each kept beside its algorithm, in one table the gateway is handed."""

from __future__ import annotations

from pydantic import BaseModel

from processors.algorithms.passage_rank import PassageRankParams
from processors.base.flow_registry import ConfigService
from processors.base.registry import Buildable, Host, ProcessorEntry, Runnable
from processors.base.settings import ParamModels
from processors.ingest.communities.detect import CommunityParams
from processors.ingest.communities.service import CommunityBuildProcessor
from processors.ingest.document_store.service import DocumentStoreProcessor
from processors.ingest.documents.params import DocumentLoadParams
from processors.ingest.documents.service import DocumentLoadProcessor
from processors.ingest.extractor import prompts as extractor
from processors.ingest.extractor.service import ExtractorProcessor
from processors.ingest.triples.service import TriplesStoreProcessor
from processors.models.embeddings.service import EmbeddingsParams, EmbeddingsProcessor
from processors.models.text_completion.service import LLMParams, TextCompletionProcessor
from processors.query.communities import prompts as communities
from processors.query.communities.service import CommunitiesProcessor
from processors.query.documents.service import DocumentsProcessor
from processors.query.graph_embeddings.service import GraphEmbeddingsProcessor
from processors.query.label_resolver.service import LabelParams, LabelResolverProcessor
from processors.query.triples.service import TriplesProcessor
from processors.retrieval.drift import prompts as drift
from processors.retrieval.drift.service import DriftProcessor
from processors.retrieval.drift.settings import DriftSettings
from processors.retrieval.graph_rag.rag import SYSTEM_PROMPT as GRAPH_RAG_SYSTEM
from processors.retrieval.graph_rag.rag import GraphRagSettings
from processors.retrieval.graph_rag.service import GraphRagProcessor
from processors.retrieval.kg_query.context import SYSTEM as KG_QUERY_SYSTEM
from processors.retrieval.kg_query.query import KgQuerySettings
from processors.retrieval.kg_query.service import KgQueryProcessor
from processors.retrieval.lazy_rag import prompts as lazy_rag
from processors.retrieval.lazy_rag.retrieve import LazyRagSettings
from processors.retrieval.lazy_rag.service import LazyRagProcessor
from processors.retrieval.reranker.rerank import RerankerSettings
from processors.retrieval.reranker.service import RerankerProcessor
from schemas import services as sv
from schemas.prompts import ServicePrompt as Prompt
from schemas.prompts import prompt_table
from schemas.services import AnyService


class _Gateway:
    """The gateway's entry, imported when it is built: aiohttp, the MCP SDK and the routes take
    seconds to import, and a `kgflow query` or `kgflow load` in this process never runs them."""

    name = "gateway"

    @classmethod
    def create(cls, host: Host) -> Runnable:
        """The gateway processor, built on `host`."""
        from processors.gateway.service import GatewayProcessor

        return GatewayProcessor.create(host)


CONFIG = ProcessorEntry("config", ConfigService)
GATEWAY = ProcessorEntry("gateway", _Gateway)


def _serving(service: AnyService, cls: type[Buildable], params: type[BaseModel] | None = None) -> ProcessorEntry:
    """A processor named after the one service it serves (the gateway finds a service's processor
    in a blueprint by that name)."""
    return ProcessorEntry(service.name, cls, (service,), params)


FLOW_PROCESSORS = (
    _serving(sv.EMBEDDINGS, EmbeddingsProcessor, EmbeddingsParams),
    _serving(sv.GRAPH_EMBEDDINGS, GraphEmbeddingsProcessor),
    _serving(sv.TRIPLES, TriplesProcessor),
    _serving(sv.TRIPLES_STORE, TriplesStoreProcessor),
    _serving(sv.LABEL_RESOLVER, LabelResolverProcessor, LabelParams),
    _serving(sv.GRAPH_RAG, GraphRagProcessor, GraphRagSettings),
    _serving(sv.TEXT_COMPLETION, TextCompletionProcessor, LLMParams),
    _serving(sv.DOCUMENTS, DocumentsProcessor, PassageRankParams),
    _serving(sv.DOCUMENT_STORE, DocumentStoreProcessor),
    _serving(sv.EXTRACTOR, ExtractorProcessor),
    _serving(sv.DOCUMENT_LOAD, DocumentLoadProcessor, DocumentLoadParams),
    _serving(sv.COMMUNITY_BUILD, CommunityBuildProcessor, CommunityParams),
    _serving(sv.COMMUNITIES, CommunitiesProcessor),
    _serving(sv.LAZY_RAG, LazyRagProcessor, LazyRagSettings),
    _serving(sv.KG_QUERY, KgQueryProcessor, KgQuerySettings),
    _serving(sv.DRIFT, DriftProcessor, DriftSettings),
    _serving(sv.RERANKER, RerankerProcessor, RerankerSettings),
)
PROCESSORS: dict[str, ProcessorEntry] = {p.name: p for p in (CONFIG, *FLOW_PROCESSORS, GATEWAY)}
# What the config service checks a flow's parameters against.
PARAMS: ParamModels = {p.name: p.params for p in PROCESSORS.values()}


# The prompts kgflow's services ask their text-completion with (the gateway shows them read-only).
PROMPTS = prompt_table(
    Prompt(id="graph-rag-answer", system=GRAPH_RAG_SYSTEM, response_type="text", service=sv.GRAPH_RAG.name),
    Prompt(
        id="lazy-rag-summary",
        system=lazy_rag.SUMMARY_SYSTEM,
        response_type="json",
        service=sv.LAZY_RAG.name,
        schema_=lazy_rag.SUMMARY_SCHEMA,
    ),  # fmt: skip
    Prompt(id="kg-query-answer", system=KG_QUERY_SYSTEM, response_type="text", service=sv.KG_QUERY.name),
    Prompt(id="drift-hyde", system=drift.HYDE_SYSTEM, response_type="text", service=sv.DRIFT.name),
    Prompt(id="drift-primer", system=drift.PRIMER_SYSTEM, response_type="json", service=sv.DRIFT.name),
    Prompt(id="drift-local", system=drift.LOCAL_SYSTEM, response_type="json", service=sv.DRIFT.name),
    Prompt(id="drift-aggregate", system=drift.AGGREGATE_SYSTEM, response_type="json", service=sv.DRIFT.name),
    Prompt(
        id="community-summary", system=communities.SUMMARY_SYSTEM, response_type="text", service=sv.COMMUNITIES.name
    ),  # fmt: skip
    Prompt(
        id="extract-relations", system=extractor.RELATIONS_SYSTEM, response_type="json", service=sv.EXTRACTOR.name
    ),  # fmt: skip
)


def processor_entry(name: str) -> ProcessorEntry:
    """The entry of processor `name` (a clear error naming the known ones)."""
    entry = PROCESSORS.get(name)
    if entry is None:
        raise ValueError(f"unknown processor {name!r}; known: {', '.join(PROCESSORS)}")
    return entry

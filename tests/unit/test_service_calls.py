"""Each retrieval processor's declared calls come from its sources protocol: every protocol method
is served over the bus by a method marked with the services it calls, and a source method that
names no service is refused before a flow starts."""

from __future__ import annotations

from typing import Protocol

import pytest

from processors.base.bus import MemoryBus
from processors.retrieval.bus_sources import BusSources, calls_of, uses
from processors.retrieval.drift.service import DriftProcessor
from processors.retrieval.drift.sources import DriftSources
from processors.retrieval.graph_rag.service import GraphBusSources, GraphRagProcessor
from processors.retrieval.graph_rag.sources import GraphSources
from processors.retrieval.kg_query.service import KgQueryProcessor
from processors.retrieval.kg_query.sources import KgSources
from processors.retrieval.lazy_rag.service import LazyRagProcessor
from processors.retrieval.lazy_rag.sources import LazySources
from processors.retrieval.reranker.service import RerankerProcessor
from processors.retrieval.reranker.sources import RerankSources
from schemas.services import COMMUNITIES, DOCUMENTS, EMBEDDINGS, EXTRACTOR, TEXT_COMPLETION


def test_drift_calls_what_its_protocol_needs_and_nothing_else() -> None:
    # drift's protocol has no entity search (graph-embeddings), extractor or reranker method
    names = [s.name for s in DriftProcessor(MemoryBus()).calls()]
    assert len(names) == len(set(names))
    assert {EMBEDDINGS.name, DOCUMENTS.name, COMMUNITIES.name, TEXT_COMPLETION.name} <= set(names)
    assert not {"graph-embeddings", EXTRACTOR.name, "reranker"} & set(names)


@pytest.mark.parametrize(
    ("processor", "impl", "protocol"),
    [
        (LazyRagProcessor, BusSources, LazySources),
        (KgQueryProcessor, BusSources, KgSources),
        (DriftProcessor, BusSources, DriftSources),
        (RerankerProcessor, BusSources, RerankSources),
        (GraphRagProcessor, GraphBusSources, GraphSources),
    ],
)
def test_each_protocol_method_is_served_by_a_declared_call(processor, impl, protocol) -> None:  # type: ignore[no-untyped-def]
    declared = {s.name for s in processor(MemoryBus()).calls()}
    for name in [n for n in vars(protocol) if not n.startswith("_") and callable(vars(protocol)[n])]:
        marked = getattr(impl, name)._service_calls
        assert {s.name for s in marked} <= declared, name


def test_a_source_method_that_names_no_service_is_refused() -> None:
    class Needs(Protocol):
        async def embed(self, text: str) -> list[float]: ...

        async def unmarked(self) -> None: ...

    class Impl:
        @uses(EMBEDDINGS)
        async def embed(self, text: str) -> list[float]:
            return []

        async def unmarked(self) -> None:
            return None

    with pytest.raises(TypeError, match="Impl.unmarked"):
        calls_of(Impl, Needs)
    assert calls_of(Impl, type("Only", (Protocol,), {"embed": Impl.embed})) == [EMBEDDINGS]

"""The `llm` extractor with the real local model (SmolLM2-135M through llama.cpp), for the
mechanics only — not the quality of what a 135M model extracts: a two-sentence document loads
with `extractor=llm`, the model is called once per chunk (the load's count agrees with the
text-completion service's own request counter) and every typed relation stored joins two
concepts the chunk mentions."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from processors.algorithms.iris import RELATED_TO, RELATION_NS
from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings
from schemas.documents import Document, EntityChunks, LoadDocuments, LoadResponse
from schemas.services import DOCUMENT_LOAD, DOCUMENTS
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL

U, C = "alice", "bio"
DOC = Document(id="curie", title="Marie Curie", text="Marie Curie was born in Warsaw. She moved to Paris in 1891.")


def text_completion_requests() -> float:
    """Requests the text-completion service has handled in this process (the model calls)."""
    return sum(
        s.value
        for metric in REGISTRY.collect()
        for s in metric.samples
        if s.name == "kgflow_requests_total" and s.labels.get("service") == "text-completion"
    )


async def test_llm_extractor_calls_the_local_model_once_per_chunk(
    tmp_path: Path, gguf_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGFLOW_LLM_TIMEOUT", "600")  # a shared machine may be slow
    params = {"extractor": "llm", "llm": "local", "extractor-timeout-s": 900}
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings(), flow_params=params) as system:
        load = RequestResponseClient.for_service(system.bus, DOCUMENT_LOAD, "default", 900)
        before, began = text_completion_requests(), time.perf_counter()
        steps = [r async for r in load.stream(LoadDocuments(user=U, collection=C, documents=[DOC]))]
        took = time.perf_counter() - began
        res: LoadResponse = steps[-1]
        assert res.error is None and res.loaded == 1 and not res.failed and res.chunks == 1
        assert res.llm_calls == res.chunks == text_completion_requests() - before
        everything = await system.stores.triples.pattern(Tenant(U, C), None, None, None, 10_000)
        typed = [t for t in everything if t.p.value.startswith(RELATION_NS) and t.p.value != RELATED_TO]
        typed = [t for t in typed if t.p.value != RDFS_LABEL]
        assert len(typed) == res.relations
        shown = [(t.s.value, t.p.value, t.o.value) for t in typed]
        print(f"\nllm extractor, local model: {took:.1f} s for {res.chunks} chunk(s) incl. embedding/spaCy; "
              f"relations {shown}; warnings {res.warnings}", file=sys.stderr)  # fmt: skip
        if typed:  # the model may find none: mechanics only
            ends = sorted({x for t in typed for x in (t.s.value, t.o.value)})
            links = (await RequestResponseClient.for_service(system.bus, DOCUMENTS, "default", 60).request(
                EntityChunks(user=U, collection=C, entities=ends))).links  # fmt: skip
            assert {m.entity for m in links.mentions} == set(ends)  # every end is a concept of the chunk
            labels = await system.stores.triples.labels(Tenant(U, C), [t.p.value for t in typed])
            assert set(labels) == {t.p.value for t in typed}

"""The `llm` extractor's mechanics over the memory bus, with the real text-completion service in
front of a scripted backend (a fake of the model only: the replies are chosen per passage).
Typed relations are stored with provenance, traversed by graph-rag, removed on reload and
delete; a model error or a garbage reply skips only that chunk's relations, with a warning; no
model configured fails the load with a clear error; the default flow makes no model call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from processors.algorithms.iris import RELATED_TO, RELATION_NS, concept_iri
from processors.base.client import RemoteError, RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.ingest.documents.llm_relations import NEEDS_MODEL
from processors.models.text_completion import service as text_completion
from processors.models.text_completion.backend import ChatMessage, Completion, CompletionOptions, LLMError
from processors.stores.settings import StoreSettings
from schemas.documents import DeleteDocuments, Document, EntityChunks, ListCollections, LoadDocuments, LoadResponse
from schemas.graph_rag import GraphRagRequest
from schemas.services import DOCUMENT_LOAD, DOCUMENT_STORE, DOCUMENTS, GRAPH_RAG
from schemas.tenant import Tenant
from schemas.terms import Term

U, C = "alice", "papers"
BORN_IN = RELATION_NS + "born_in"
CURIE = Document(id="curie", title="Marie Curie", text="Marie Curie was born in Warsaw. She studied physics in Paris.")
DOCS = [
    CURIE,
    Document(id="teapot", title="Teapots", text="GARBAGE teapots are made of porcelain in China."),
    Document(id="broken", title="Lisbon", text="FAIL. The Tagus river flows into the sea at Lisbon."),
]


class ScriptedModel:
    """A backend answering by what the passage says; it counts its calls."""

    model = "scripted"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def complete(self, messages: list[ChatMessage], options: CompletionOptions) -> Completion:
        prompt = messages[-1].content
        self.prompts.append(prompt)
        if "FAIL" in prompt:
            raise LLMError("llm-error", "the scripted model failed")
        if "GARBAGE" in prompt:
            return Completion("I am a little teapot", self.model)
        found = []
        if "born in Warsaw" in prompt:
            found = [{"subject": "Marie Curie", "predicate": "born in", "object": "Warsaw"},
                     {"subject": "Marie Curie", "predicate": "married", "object": "Pierre Curie"}]  # fmt: skip
        return Completion(json.dumps({"relations": found}), self.model, in_token=50, out_token=20)

    def stream(self, messages: list[ChatMessage], options: CompletionOptions) -> Any:
        raise NotImplementedError


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    scripted = ScriptedModel()
    monkeypatch.setattr(text_completion, "make_backend", lambda p: None if p.llm == "none" else scripted)
    for var in ("KGFLOW_LLM", "KGFLOW_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return scripted


async def start(tmp_path: Path, params: dict[str, Any]) -> Any:
    return embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings(), flow_params=params)


@pytest.fixture
async def system(tmp_path: Path, model: ScriptedModel) -> AsyncIterator[System]:
    async with await start(tmp_path, {"extractor": "llm", "llm": "openai", "llm-model": "scripted"}) as s:
        yield s


def client(system: System, service):  # type: ignore[no-untyped-def]
    return RequestResponseClient.for_service(system.bus, service, "default", 120)


async def load(system: System, docs: list[Document]) -> tuple[LoadResponse, list[str]]:
    steps = [r async for r in client(system, DOCUMENT_LOAD).stream(LoadDocuments(user=U, collection=C, documents=docs))]
    return steps[-1], [s.stage for s in steps[:-1]]


async def born_in(system: System) -> list[tuple[str, str, str]]:
    found = await system.stores.triples.pattern(Tenant(U, C), None, Term.iri(BORN_IN), None, 10)
    return [(t.s.value, t.p.value, t.o.value) for t in found]


async def test_typed_relations_are_stored_traversed_and_failures_only_warn(
    system: System, model: ScriptedModel
) -> None:
    res, stages = await load(system, DOCS)
    assert res.loaded == 3 and not res.failed and res.chunks == 3
    assert res.llm_calls == 3 == len(model.prompts) and stages.count("related") == 3  # one call per chunk
    assert res.relations == 1
    assert res.warnings == [
        "llm extractor: relations of 2 of 3 chunks skipped (1 model error schema-mismatch, 1 model error llm-error)",
        "llm extractor: 1 relations dropped (1 end not named in the chunk)",
    ]
    curie, warsaw = concept_iri("marie curie"), concept_iri("warsaw")
    assert await born_in(system) == [(curie, BORN_IN, warsaw)]  # directed, ends are the concepts
    assert await system.stores.triples.labels(Tenant(U, C), [BORN_IN]) == {BORN_IN: "born in"}
    assert BORN_IN in await system.stores.entities.vectors(Tenant(U, C), [BORN_IN])

    # the chunks whose model call failed keep their concepts and co-occurrences
    ents = [concept_iri(k) for k in ("porcelain", "china", "lisbon", "sea")]
    found = (await client(system, DOCUMENTS).request(EntityChunks(user=U, collection=C, entities=ents))).links
    assert {m.entity for m in found.mentions} == set(ents)
    cooc = await system.stores.triples.pattern(Tenant(U, C), None, Term.iri(RELATED_TO), None, 1000)
    assert {concept_iri("porcelain"), concept_iri("lisbon")} <= {x for t in cooc for x in (t.s.value, t.o.value)}

    rag = await client(system, GRAPH_RAG).request(
        GraphRagRequest(user=U, collection=C, query="Where was Marie Curie born?", no_llm=True)
    )
    assert any(t.p_id == BORN_IN and t.s_id == curie and t.o_id == warsaw for t in rag.triples)

    again, _ = await load(system, DOCS)
    assert again.unchanged == 3 and again.llm_calls == 0  # an unchanged document costs no model call


async def test_reload_and_delete_remove_typed_relations(system: System, model: ScriptedModel) -> None:
    await load(system, [CURIE])
    assert len(await born_in(system)) == 1
    changed, _ = await load(system, [CURIE.model_copy(update={"text": "Marie Curie was a chemist in Paris."})])
    assert changed.loaded == 1 and changed.relations == 0 and changed.llm_calls == 1
    assert await born_in(system) == []  # what only the old text said leaves the graph ...
    assert await system.stores.triples.labels(Tenant(U, C), [BORN_IN]) == {}  # ... its predicate too
    assert await system.stores.entities.vectors(Tenant(U, C), [BORN_IN]) == {}

    assert (await load(system, [CURIE]))[0].relations == 1 and len(await born_in(system)) == 1
    deleted = await client(system, DOCUMENT_STORE).request(
        DeleteDocuments(user=U, collection=C, document_ids=["curie"])
    )
    assert deleted.deleted == 1 and await born_in(system) == []
    assert await system.stores.triples.labels(Tenant(U, C), [BORN_IN]) == {}


async def test_no_model_fails_the_load_clearly_and_stores_nothing(tmp_path: Path, model: ScriptedModel) -> None:
    async with await start(tmp_path, {"extractor": "llm"}) as system:
        with pytest.raises(RemoteError) as err:
            await load(system, DOCS)
        assert err.value.type == "llm-config" and NEEDS_MODEL in err.value.message
        assert (await client(system, DOCUMENTS).request(ListCollections(user=U))).collections == []


async def test_the_default_extractor_makes_no_model_call(tmp_path: Path, model: ScriptedModel) -> None:
    async with await start(tmp_path, {"llm": "openai", "llm-model": "scripted"}) as system:
        res, stages = await load(system, DOCS)
        assert res.loaded == 3 and res.llm_calls == 0 and res.relations == 0 and res.warnings == []
        assert model.prompts == [] and "related" not in stages
        assert await born_in(system) == []

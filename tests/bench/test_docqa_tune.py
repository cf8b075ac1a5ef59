"""The tuner: refuses the validation half without --confirm, checks its parameters, and runs each
setting as its own flow whose parameters the services really apply; the dense text-only baseline
ranks the stored chunks by their text alone. A three-document corpus on the real flow and model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from bench.docqa import tune as docqa_tune
from bench.docqa.collection import COLLECTION, USER, client
from bench.docqa.dense import dense_text_only
from bench.docqa.homes import index
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.settings import StoreSettings
from schemas.documents import Document
from schemas.lazy_rag import LazyRagRequest
from schemas.services import LAZY_RAG

DOCS = [
    Document(id="curie", title="Marie Curie", text="Marie Curie was a physicist. She worked in Paris with Pierre."),
    Document(id="paris", title="Paris", text="Paris is the capital of France. The Seine flows through Paris."),
    Document(id="warsaw", title="Warsaw", text="Warsaw is the capital of Poland. Marie Curie was born in Warsaw."),
]


def test_validation_half_is_refused_without_confirm(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_tuning(*args: object) -> None:
        raise AssertionError("nothing may be measured on the validation half without --confirm")

    monkeypatch.setattr(docqa_tune, "tune", no_tuning)
    with pytest.raises(SystemExit, match="refusing to tune on the validation half"):
        docqa_tune.main(["--set", "musique", "--half", "validation", "--param", "hops=1,2"])
    docqa_tune.check_half("validation", confirm=True)
    docqa_tune.check_half("tuning", confirm=False)


def test_parameters_are_checked_before_anything_runs() -> None:
    assert docqa_tune.parse_param("hop-decay=0.5, 1.0") == ("hop_decay", ["0.5", "1.0"])
    assert docqa_tune.parse_param("chunk_limit=5") == ("chunk_limit", ["5"])  # lazy-rag's
    with pytest.raises(ValueError, match="not a parameter of documents or lazy-rag"):
        docqa_tune.parse_param("edge-limit=3")  # graph-rag's
    with pytest.raises(ValueError, match="hops"):
        docqa_tune.parse_param("hops=1,9")  # graphrank takes at most 4
    with pytest.raises(ValueError, match="expected NAME=V1"):
        docqa_tune.parse_param("hops")
    # each parameter's readers are named (flow parameters are one flat set across processors)
    assert docqa_tune.every_reader("bridge_seeds") == ["lazy-rag"]
    assert "documents" in docqa_tune.every_reader("hops")
    grid = docqa_tune.grid([("hops", ["1", "2"]), ("w_lex", ["0.3"])])
    assert grid == [{}, {"hops": "1", "w-lex": "0.3"}, {"hops": "2", "w-lex": "0.3"}]


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        cost = await index(s, DOCS)
        assert cost["failed"] == 0 and cost["llm_calls_at_index_time"] == 0
        yield s


async def chunks_returned(system: System, flow: str) -> int:
    req = LazyRagRequest(user=USER, collection=COLLECTION, query="Where did Marie Curie work?", no_llm=True)
    return len((await client(system, LAZY_RAG, flow).request(req)).chunks)


async def test_each_setting_runs_as_a_flow_with_its_parameters(system: System) -> None:
    every = [{"question": "Where was Marie Curie born?", "supporting_paragraph_ids": [d.id for d in DOCS]}]
    assert await chunks_returned(system, "default") == len(DOCS)
    assert (await docqa_tune.evaluate(system, "default", every))["recall@10"] == 1.0
    async with docqa_tune.flow_with(system, "tune-0", {"chunk-limit": "1"}) as flow:
        assert await chunks_returned(system, flow) == 1
        got = await docqa_tune.evaluate(system, flow, every)
        assert got["recall@2"] == got["recall@10"] == round(1 / 3, 4)  # one chunk: one document of three
    assert not any("tune-0" in p.flow_ids for p in system.processors if hasattr(p, "flow_ids"))
    assert await chunks_returned(system, "default") == len(DOCS)


async def test_dense_text_only_embeds_the_stored_chunk_text_without_its_title(system: System, tmp_path: Path) -> None:
    store = system.stores.documents
    with pytest.raises(RuntimeError, match="chunks read back"):
        await dense_text_only(tmp_path, store, DOCS, expected=len(DOCS) + 1)
    dense = await dense_text_only(tmp_path, store, DOCS, expected=len(DOCS))
    assert sorted(dense.documents) == sorted(d.id for d in DOCS)
    model = OnnxMiniLM.shared()
    row = dense.documents.index("paris")
    text_only, titled = await model.embed([DOCS[1].text, f"{DOCS[1].title}\n{DOCS[1].text}"])
    assert np.allclose(dense.matrix[row], text_only, atol=1e-4)
    assert not np.allclose(dense.matrix[row], titled, atol=1e-3)
    assert dense.rank(text_only, 2)[0] == "paris"
    again = await dense_text_only(tmp_path, store, [], expected=0)  # cached in the home: not recomputed
    assert again.documents == dense.documents and np.array_equal(again.matrix, dense.matrix)

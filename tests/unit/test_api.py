"""The Python API on the embedded default: flow operations before anything runs go to the registry
file (nothing started), streaming yields progress then the answer, the reranker is reachable, the
sync client gives what the async one gives, and the CLI prints what the API returns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from processors.commands.api import Kgflow
from processors.commands.api_sync import KgflowSync
from processors.commands.cli import main
from schemas.drift import DriftRequest
from schemas.lazy_rag import LazyRagResponse
from schemas.reranker import RerankItem
from schemas.services import DRIFT

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Which element did Marie Curie name after her homeland?"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("api") / "home"
    with KgflowSync.embedded(path) as kg:
        assert kg.load_documents([ROOT / "examples" / "documents"], collection="docs").loaded == 5
    return path


async def test_flow_operations_need_no_running_processors(tmp_path: Path) -> None:
    async with Kgflow.embedded(tmp_path / "fresh") as kg:
        await kg.put_blueprint(ROOT / "flows" / "default.yaml")
        flow = await kg.start_flow("second", "default", {"chunk-tokens": 120}, "a test flow")
        assert flow is not None and flow.parameters == {"chunk-tokens": 120}
        assert (await kg.flows())["flows"] == ["second"]
        await kg.stop_flow("second")
        with pytest.raises(ValueError, match="second"):
            await kg.stop_flow("second")
        assert kg.transport._bus is None  # type: ignore[attr-defined]  # nothing was started


async def test_stream_yields_progress_then_the_answer(home: Path) -> None:
    async with Kgflow.embedded(home) as kg:
        req = DriftRequest(user="default", collection="docs", query=QUESTION, no_llm=True)
        seen = [r async for r in kg.stream(DRIFT, req)]
        assert all(r.progress is not None for r in seen[:-1]) and len(seen) > 3
        assert seen[-1].end_of_stream and seen[-1].chunks
        chunks = (await kg.lazy_rag(QUESTION, collection="docs", no_llm=True)).chunks
        items = [RerankItem(id=c.id, kind="chunk", text=c.text, score=c.score or 0.0) for c in chunks[:4]][::-1]
        reranked = await kg.rerank(QUESTION, items, collection="docs", strategy="semantic")
        assert sorted(r.id for r in reranked.results) == sorted(i.id for i in items)
        assert not await kg.delete_collection("never-there")


def test_the_cli_prints_what_the_api_returns(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with KgflowSync.embedded(home) as kg:
        api = kg.lazy_rag(QUESTION, collection="docs", no_llm=True)
        local = kg.kg_query(QUESTION, collection="docs", mode="local", no_llm=True)
        mode = local.mode
    assert local.answer == local.response and local.answer.startswith("No language model")
    assert main(["query", "lazy-rag", QUESTION, "-C", "docs", "--json", "--no-llm", "--home", str(home)]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in cli["chunks"]] == [c.id for c in api.chunks]
    assert cli["answer"] == api.response == api.answer and mode == "local"
    assert api.model_dump() == LazyRagResponse.model_validate(api.model_dump()).model_dump()  # still the wire model

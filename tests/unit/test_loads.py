"""Loads are honest and resumable: an unfinished load is reported by queries, a rerun completes it
and says what it repaired; a malformed file stores nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from processors.base.client import RequestResponseClient
from processors.commands.cli import main
from processors.commands.system import embedded
from processors.ingest.triples.loader import MODEL_PROBE, load_triples
from processors.ingest.triples.readers import read_triples
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.factory import open_stores
from processors.stores.settings import StoreSettings
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.services import GRAPH_RAG
from schemas.tenant import Tenant

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample.tsv"
QUESTION = "Where was marie_curie's husband born?"


class StuckEmbedder:
    """The local model, except that labels are never embedded: the load is killed while it waits."""

    model = OnnxMiniLM.model

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def embed(self, texts: Sequence[str], max_tokens: int | None = None) -> list[list[float]]:
        if list(texts) == [MODEL_PROBE]:  # which model and dimension the load writes: answered
            return await OnnxMiniLM.shared().embed(texts)
        self.entered.set()
        await asyncio.sleep(3600)
        return []


async def ask(home: Path, collection: str) -> GraphRagResponse:
    """One retrieval-only question over the embedded system."""
    async with embedded(StoreSettings(home=home)) as system:
        client = RequestResponseClient.for_service(system.bus, GRAPH_RAG, "default", 30)
        try:
            return await client.request(GraphRagRequest(user="u", collection=collection, query=QUESTION, no_llm=True))
        finally:
            await client.stop()


async def test_a_killed_load_is_reported_and_a_rerun_completes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    stores = open_stores(StoreSettings(home=home))
    stuck = StuckEmbedder()
    task = asyncio.create_task(load_triples(stores, stuck, Tenant("u", "c"), read_triples(SAMPLE), source="sample.tsv"))
    await stuck.entered.wait()  # every triple is stored, no vector is: killed here
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    state = await stores.triples.load_state(Tenant("u", "c"))
    assert state is not None and not state.complete
    await stores.close()

    res = await ask(home, "c")
    [warning] = res.warnings
    assert warning.type == "incomplete-collection" and "sample.tsv" in warning.message and "again" in warning.message

    stores = open_stores(StoreSettings(home=home))
    report = await load_triples(
        stores, OnnxMiniLM.shared(), Tenant("u", "c"), read_triples(SAMPLE), source="sample.tsv"
    )
    assert report.triples == 0 and report.embedded == report.entities + report.relations  # every label lacked a vector
    assert report.repaired is not None and "sample.tsv" in report.repaired
    again = await load_triples(stores, OnnxMiniLM.shared(), Tenant("u", "c"), read_triples(SAMPLE), source="sample.tsv")
    assert again.embedded == 0 and again.repaired is None  # nothing left to do
    await stores.close()

    res = await ask(home, "c")
    assert res.warnings == [] and ("pierre curie", "place of birth", "paris") in {(t.s, t.p, t.o) for t in res.triples}


async def test_a_load_that_fails_part_way_says_why(tmp_path: Path) -> None:
    home = tmp_path / "home"
    bad = tmp_path / "bad.jsonl"
    good = '{"s": "marie_curie", "p": "spouse", "o": "pierre_curie"}\n'
    bad.write_text(good * 3 + '{"s": "x", "p": "", "o": "y"}\n')
    stores = open_stores(StoreSettings(home=home))
    with pytest.raises(ValueError, match=r"bad.jsonl:4: the relation field is empty"):
        await load_triples(stores, OnnxMiniLM.shared(), Tenant("u", "c"), read_triples(bad), source=str(bad))
    state = await stores.triples.load_state(Tenant("u", "c"))
    await stores.close()
    assert state is not None and not state.complete and "bad.jsonl:4" in (state.error or "")
    res = await ask(home, "c")
    assert res.warnings[0].type == "incomplete-collection" and "bad.jsonl:4" in res.warnings[0].message


def test_the_cli_stores_nothing_from_a_malformed_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    lines = SAMPLE.read_text().splitlines()
    bad = tmp_path / "bad.tsv"
    bad.write_text("\n".join(lines[:5] + ["a\t\tc"] + lines[5:]) + "\n")
    assert main(["load", "triples", str(bad), "--home", str(home), "-C", "c", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:6: the relation field is empty" in err and "Traceback" not in err
    assert main(["load", "triples", str(SAMPLE), "--home", str(home), "-C", "ok", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["query", "graph-rag", "marie curie", "--home", str(home), "-C", "c", "--no-llm"]) == 1
    err = capsys.readouterr().err
    assert "collection 'c' is empty or unknown" in err and "known collections of user 'default': ok" in err


def test_progress_counts_each_phase_exactly(tmp_path: Path) -> None:
    data = tmp_path / "g.jsonl"
    data.write_text('{"s": "a", "p": "r", "o": "b"}\n{"s": "b", "p": "r", "o": "c"}\n')
    seen: dict[str, list[tuple[int, int | None]]] = {"store": [], "embed": []}

    async def run() -> None:
        stores = open_stores(StoreSettings(home=tmp_path / "home"))
        try:
            await load_triples(stores, OnnxMiniLM.shared(), Tenant("u", "c"), read_triples(data),
                               lambda phase, n, total: seen[phase].append((n, total)))  # fmt: skip
        finally:
            await stores.close()

    asyncio.run(run())
    assert sum(n for n, _ in seen["store"]) == 6  # two edges, and the labels of a, r, b, c once each
    assert sum(n for n, _ in seen["embed"]) == 4 and {t for _, t in seen["embed"]} == {4}  # a, b, c, r
